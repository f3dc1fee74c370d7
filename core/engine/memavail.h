/*
 * memavail.h - (internal to core/engine) how much memory this process can
 * still take: the least of the kernel's MemAvailable and what the cgroups
 * it runs in (v2 memory.max - memory.current, v1 memory.limit_in_bytes -
 * memory.usage_in_bytes, at its own cgroup and every ancestor) leave.
 */
#ifndef KVCHAT_CORE_ENGINE_MEMAVAIL_H
#define KVCHAT_CORE_ENGINE_MEMAVAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* true and *bytes (with what limits it, e.g. "MemAvailable in /proc/meminfo"
 * or "the cgroup's memory.max - memory.current", into what), or false when
 * nothing says (no /proc) */
bool llm_mem_available(uint64_t *bytes, char *what, size_t what_size);

#endif
