/*
 * packed.c - a model's packed weights (quant.h): every quantized weight
 * the engine multiplies is stored as groups of 8 rows, every float (F32,
 * F16, BF16) weight as panels of BLIS's micro-kernel width (fmm.c), the
 * last group padded with zero rows, packed at open, and a cache file lets
 * later opens map them instead of packing again.
 *
 * Why a cache file: packing writes a fresh copy of most of a model's
 * weights, and fresh memory is not free: on the 2-core VMs we measure on,
 * faulting in zeroed anonymous memory cost 0.4-2 ms per MB, so packing a
 * 0.5 GB Q8_0 model took 0.2-1 s at every open, on a tool whose point is
 * resuming fast. So the packed bytes are written once to a cache file (by a
 * thread in the background, synced, then renamed into place) and later
 * opens map that file from the page cache: nothing to zero, nothing to copy.
 * A mapped file's pages are then prefaulted by a thread in the background
 * (MADV_POPULATE_READ in 16 MB steps) while the opener tokenizes and
 * restores, instead of faulting in one by one during the first prefill.
 *
 * Or, where the kernel gives anonymous memory transparent huge pages and
 * the copy fits easily (at most a quarter of the memory available), the
 * cache file is read (pread, from the page cache) into anonymous huge
 * pages instead of being mapped, by threads in the background: under a
 * hypervisor that shadows the guest's page tables (the VMs we measure on)
 * the first touch of each 4 KiB page of a file mapping costs about 1.1 us,
 * 150 ms for 500 MB, and a copy into 2 MiB pages maps 512 times fewer
 * pages. The first pass waits for the copy to end (llm_model_first_pass),
 * helping with what is left. KVCHAT_PACKED_LOAD=map|copy forces either
 * way (tests compare them bit for bit). Should a read fail, the file is
 * mapped over the copy at the same address, so that the weights'
 * pointers stay valid.
 *
 * The cache file (PACK_FILE_VERSION 6), one per model path, named by a
 * 64-bit FNV-1a hash of the model's real path:
 *   4096-byte header: "KVCPACK\0", u32 version, u32 types (bit t: weights of
 *   type t < 32 are packed), u64 size, device, inode, mtime s, mtime ns of the
 *   model file, u64 data bytes, u32 packed weights, u32 path length, u64
 *   ctime s, ctime ns of the model file, 96 bytes of the float panels'
 *   layout and kernel (llm_fmm_layout: BLIS's version, sub-configuration,
 *   MR, NR and kvchat's KC), u32 types again (bit t - 32: type t >= 32,
 *   such as MXFP4's 39), the path (little-endian, zero-padded);
 *   then the packed weights, in model order (each layer's q, k, v, o, gate,
 *   up, down, and qwen35's z, alpha, beta where bound, then the output,
 *   then each mixture-of-experts layer's router and its experts' gates,
 *   ups and downs, each expert's matrix packed on its own, then gemma4's
 *   per_layer_model_proj and each layer's inp_gate and proj),
 *   each ceil(rows / group rows) groups (the layouts of quant-pack.c,
 *   quant-k.c and fmm.c) at a multiple of 64 bytes.
 * A file whose header does not match the model as opened (another file,
 * the same file changed, another kvchat with other packed types or
 * layouts) or whose size is not header + data is ignored and replaced.
 * The status-change time is what catches a file patched in place with its
 * mtime put back (touch -d): no utimes call can set ctime. A cache path
 * that is not a regular file (a FIFO, a device) is opened non-blocking and
 * ignored, never waited on.
 * Like the GGUF itself, the packed data is trusted once its header and
 * size check out.
 */
#include "core/engine/model.h"
#include "core/engine/memavail.h"

#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PACK_FILE_VERSION 6
#define HEADER_BYTES 4096
#define PACK_ITEM_GROUPS 64 /* groups of 8 rows per work item while packing */
#define LOAD_CHUNK (2u << 20)  /* a huge page (PMD): each is faulted in by one thread */
#define LOAD_THREADS_MAX 8

struct pack_header {
    char magic[8];
    uint32_t version, types;
    uint64_t src_size, src_dev, src_ino, src_mtime_s, src_mtime_ns;
    uint64_t data_bytes;
    uint32_t n_weights, path_len;
    uint64_t src_ctime_s, src_ctime_ns;
    char layout[96]; /* the float weights' panels and kernel (llm_fmm_layout) */
    uint32_t types_hi; /* bit t - 32: weights of type t >= 32 are packed */
    char path[HEADER_BYTES - 188];
};
_Static_assert(sizeof(struct pack_header) == HEADER_BYTES, "pack header size");

struct llm_packed {
    void *map;          /* the packed bytes (anonymous), or the cache file's mapping */
    size_t map_bytes;
    const uint8_t *data;
    int64_t n_weights;
    size_t data_bytes;
    bool from_cache;
    /* the background writer of the cache file */
    pthread_t writer;
    bool writing;
    /* the background prefault of a mapped cache file */
    pthread_t faulter;
    bool faulting;
    atomic_bool stop_faulting;
    atomic_bool stop_touching; /* the first pass began (llm_model_first_pass) */
    /* the copy of the cache file into anonymous huge pages (load_worker) */
    int load_fd;                 /* the cache file, while loading; -1 after */
    size_t load_chunks;          /* LOAD_CHUNK-byte pieces of data_bytes */
    _Atomic size_t load_next;    /* the next piece to read */
    atomic_bool load_failed;     /* a read failed or came short */
    pthread_t loader[LOAD_THREADS_MAX];
    int n_loaders;
    char *file;          /* the cache file's path */
    struct pack_header *header;
};

/* ==== which weights ==== */

struct plan {
    int64_t nw;
    struct llm_weight **w; /* (nw) */
    size_t *off;           /* (nw) offsets in the packed bytes */
    size_t total;
    uint32_t types, types_hi;
};

static void plan_free(struct plan *p)
{
    free(p->w);
    free(p->off);
    p->w = NULL;
    p->off = NULL;
}

static int64_t group_rows(const struct llm_weight *W) { return llm_mm_group_rows(W->mm); }
static int64_t groups_of(const struct llm_weight *W) { return (W->m.n_out + group_rows(W) - 1) / group_rows(W); }
static size_t packed_bytes(const struct llm_weight *W) { return (size_t)groups_of(W) * W->m.group_bytes; }

/* every 2-D weight the engine multiplies whose type is stored packed;
 * 0 or -1 (no memory) */
static int plan_make(struct llm_model *m, struct plan *p)
{
    *p = (struct plan){0};
    int64_t dense = m->n_layer * 10 + 1, X = m->n_expert;
    int64_t moe_end = dense + m->n_layer_moe * (1 + 3 * X);
    int64_t max = moe_end + (m->n_pl > 0 ? 1 + 2 * m->n_layer : 0); /* gemma4's per-layer inputs */
    p->w = malloc((size_t)max * sizeof *p->w);
    p->off = malloc((size_t)max * sizeof *p->off);
    if (!p->w || !p->off) {
        plan_free(p);
        return -1;
    }
    for (int64_t i = 0, l = 0; i < max; i++) {
        struct llm_weight *W;
        if (i < dense - 1) {
            struct llm_layer *L = &m->layers[i / 10];
            struct llm_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                       &L->w_z, &L->w_alpha, &L->w_beta};
            W = lw[i % 10];
        } else if (i == dense - 1) {
            W = &m->output;
        } else if (i >= moe_end) { /* gemma4: per_layer_model_proj, each layer's inp_gate and proj */
            int64_t k = i - moe_end;
            W = k == 0 ? &m->pl_model_proj
                       : (k - 1) % 2 ? &m->layers[(k - 1) / 2].w_pl_proj : &m->layers[(k - 1) / 2].w_pl_gate;
        } else { /* the experts: router, gates, ups, downs of each layer with them */
            int64_t j = (i - dense) % (1 + 3 * X);
            if (j == 0)
                while (!m->layers[l].exp_gate)
                    l++;
            struct llm_layer *L = &m->layers[l];
            W = j == 0 ? &L->w_router : &L->exp_gate[j - 1]; /* exp_up and exp_down follow exp_gate */
            if (j == 3 * X)
                l++;
        }
        if (!W->mm || !W->mm->packed) /* unbound (qwen35's), or not packed */
            continue;
        p->w[p->nw] = W;
        p->off[p->nw++] = p->total;
        p->total += (packed_bytes(W) + 63) / 64 * 64;
        if (W->m.type < 32)
            p->types |= 1u << W->m.type;
        else
            p->types_hi |= 1u << (W->m.type - 32);
    }
    return 0;
}

/* ==== packing in memory ==== */

struct pack_work {
    const struct plan *p;
    const struct llm_gguf *g; /* the model's file, whose pages packing gives back */
    const int64_t *first; /* first work item of each weight */
    int64_t items;
    void *map;
    _Atomic int64_t next;
};

static void *pack_worker(void *arg)
{
    struct pack_work *pw = arg;
    const struct plan *p = pw->p;
    for (int64_t k; (k = atomic_fetch_add(&pw->next, 1)) < pw->items;) {
        int64_t i = 0;
        while (pw->first[i + 1] <= k)
            i++;
        const struct llm_weight *W = p->w[i];
        int64_t g0 = (k - pw->first[i]) * PACK_ITEM_GROUPS, g1 = g0 + PACK_ITEM_GROUPS;
        if (g1 > groups_of(W))
            g1 = groups_of(W);
        int64_t gr = group_rows(W);
        for (int64_t g = g0; g < g1; g++) {
            int64_t rows = W->m.n_out - g * gr < gr ? W->m.n_out - g * gr : gr;
            W->mm->pack(W->rows + (size_t)(g * gr) * W->m.row_bytes, W->m.row_bytes, rows, W->m.n_in,
                        (uint8_t *)pw->map + p->off[i] + (size_t)g * W->m.group_bytes);
        }
        /* at once, so the file's pages and the packed copy are not both held */
        int64_t r0 = g0 * gr, r1 = g1 * gr < W->m.n_out ? g1 * gr : W->m.n_out;
        llm_gguf_release(pw->g, W->rows + (size_t)r0 * W->m.row_bytes, (size_t)(r1 - r0) * W->m.row_bytes);
    }
    return NULL;
}

/* the planned weights packed into a new anonymous mapping (by as many
 * OpenMP threads as cores), or NULL */
static void *pack_in_memory(const struct plan *p, const struct llm_gguf *g)
{
    int64_t *first = malloc((size_t)(p->nw + 1) * sizeof *first); /* first work item of each */
    if (!first)
        return NULL;
    void *map = mmap(NULL, p->total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        free(first);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(map, p->total, MADV_HUGEPAGE); /* fewer TLB misses while decode streams them */
#endif
    first[0] = 0;
    for (int64_t i = 0; i < p->nw; i++)
        first[i + 1] = first[i] + (groups_of(p->w[i]) + PACK_ITEM_GROUPS - 1) / PACK_ITEM_GROUPS;
    struct pack_work pw = {p, g, first, first[p->nw], map, 0};
    /* OpenMP here (one-off bulk work, items taken from a shared counter):
     * as many threads as cores, or OMP_NUM_THREADS; the forward pass stays
     * on the engine's pool */
    int nt = getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : llm_default_threads();
#pragma omp parallel num_threads(nt)
    pack_worker(&pw);
    /* the pages items shared (tied embeddings: the few rows decode looks
     * up come back alone) */
    for (int64_t i = 0; i < p->nw; i++)
        llm_gguf_release(g, p->w[i]->rows, (size_t)p->w[i]->m.n_out * p->w[i]->m.row_bytes);
    free(first);
    return map;
}

/* ==== the cache file ==== */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

/* the header the model's cache file must have; false if it cannot have one */
static bool expected_header(const struct llm_model *m, const char *real, const struct plan *p,
                            struct pack_header *h)
{
    uint64_t id[4], ct[2];
    size_t len = strlen(real);
    if (!llm_gguf_identity(m->gguf, id) || !llm_gguf_ctime(m->gguf, ct) || len >= sizeof h->path)
        return false;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "KVCPACK", 8);
    h->version = PACK_FILE_VERSION;
    h->types = p->types;
    h->types_hi = p->types_hi;
    h->src_size = llm_gguf_file_size(m->gguf);
    h->src_dev = id[0];
    h->src_ino = id[1];
    h->src_mtime_s = id[2];
    h->src_mtime_ns = id[3];
    h->src_ctime_s = ct[0];
    h->src_ctime_ns = ct[1];
    h->data_bytes = p->total;
    h->n_weights = (uint32_t)p->nw;
    h->path_len = (uint32_t)len;
    snprintf(h->layout, sizeof h->layout, "%s", llm_fmm_layout());
    memcpy(h->path, real, len);
    return true;
}

/* the cache file in dir of the model whose real path is real */
static int cache_name(const char *dir, const char *real, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%016llx.kvpack", dir, (unsigned long long)fnv1a(real));
    return n > 0 && (size_t)n < size ? 0 : -1;
}

int llm_pack_cache_file(const char *dir, const char *model_path, char *buf, size_t size)
{
    char real[PATH_MAX];
    return dir && realpath(model_path, real) ? cache_name(dir, real, buf, size) : -1;
}

/* the cache file opened if its header is h and its size right, else -1 */
static int open_cache(const char *file, const struct pack_header *h)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct pack_header got;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == HEADER_BYTES + h->data_bytes &&
        pread(fd, &got, sizeof got, 0) == (ssize_t)sizeof got && !memcmp(&got, h, sizeof got))
        return fd;
    close(fd);
    return -1;
}

/* the checked cache file fd mapped, or NULL */
static void *map_cache(int fd, const struct pack_header *h, size_t *map_bytes)
{
    void *map = mmap(NULL, HEADER_BYTES + h->data_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return NULL;
    *map_bytes = HEADER_BYTES + h->data_bytes;
    return map;
}

/* temp files of writers that died (name.tmp.PID with no such process),
 * the vocabulary cache's (core/text/vocab-cache.c) too */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *t = strstr(e->d_name, ".kvpack.tmp."), *v = strstr(e->d_name, ".kvvocab.tmp.");
        if (!t && !v)
            continue;
        long pid = strtol(t ? t + strlen(".kvpack.tmp.") : v + strlen(".kvvocab.tmp."), NULL, 10);
        if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
                unlink(path);
        }
    }
    closedir(d);
}

/* the writer thread: header and data replace name atomically (core/base);
 * on any failure the temp file goes. Every write after the first 2 MiB
 * starts at a multiple of 2 MiB in the file: the page cache then keeps
 * whole 2 MiB folios (ext4 and XFS make large folios from large writes),
 * which later opens map with one page-table entry each (FilePmdMapped):
 * 498 of 500 MB so mapped, against 374 MB when each 8 MiB write started
 * 4 KiB past a boundary, and populating and touching the mapping then
 * cost 20 ms of CPU instead of 77 ms on the VM we measure on */
static void *write_cache(void *arg)
{
    struct llm_packed *pk = arg;
    struct base_atomic a;
    if (base_atomic_open(&a, pk->file, 0600)) {
        base_atomic_abort(&a);
        return NULL;
    }
    size_t head = LOAD_CHUNK - HEADER_BYTES < pk->data_bytes ? LOAD_CHUNK - HEADER_BYTES : pk->data_bytes;
    base_atomic_write(&a, pk->header, HEADER_BYTES);
    base_atomic_write(&a, pk->data, head);
    base_atomic_write(&a, pk->data + head, pk->data_bytes - head);
    base_atomic_commit(&a);
    return NULL;
}

/* the prefault thread, while the opener goes on tokenizing and restoring:
 * first the mapped cache file's page-table entries made at once
 * (MADV_POPULATE_READ, Linux 5.14), so the first prefill finds the pages
 * mapped instead of faulting them in one by one (about 150 ms for 500 MB);
 * then a byte of each page read, in model order, until the first pass
 * begins. Why read what is mapped: under a hypervisor that shadows the
 * guest's page tables (the VMs we measure on), the first access from user
 * space to each 4 KiB page still exits to the host, about 1.1 us a page
 * (150 ms for 500 MB, against 10-30 ms for the populating itself and 4 ms
 * for a second pass of touches); on bare metal the reads cost about as
 * much as that second pass. The pass's own threads touch what is left:
 * the touching stops when it begins, so that the two cores are the
 * pass's. */
static void *prefault(void *arg)
{
    struct llm_packed *pk = arg;
    const size_t step = 16u << 20; /* so that closing the model stops it soon */
    size_t pg = sysconf(_SC_PAGESIZE) > 0 ? (size_t)sysconf(_SC_PAGESIZE) : 4096;
    bool populated = false;
#ifdef MADV_POPULATE_READ
    populated = true;
    for (size_t off = 0; off < pk->map_bytes && !atomic_load(&pk->stop_faulting); off += step) {
        size_t n = pk->map_bytes - off < step ? pk->map_bytes - off : step;
        if (madvise((uint8_t *)pk->map + off, n, MADV_POPULATE_READ) != 0) {
            populated = false;
            break;
        }
    }
    base_trace("packed weights: page tables populated");
#endif
    const size_t touch_step = 1u << 20; /* so that the first pass stops it soon */
    uint8_t sum = 0;
    for (size_t off = 0; off < pk->map_bytes && !atomic_load(&pk->stop_faulting) &&
                          (!populated || !atomic_load(&pk->stop_touching));
         off += touch_step) {
        size_t n = pk->map_bytes - off < touch_step ? pk->map_bytes - off : touch_step;
        const volatile uint8_t *p = (const volatile uint8_t *)pk->map + off;
        for (size_t i = 0; i < n; i += pg)
            sum ^= p[i];
    }
    (void)sum;
    base_trace("packed weights: prefault thread done");
    return NULL;
}

/* ==== the copy into anonymous huge pages ==== */

/* how the packed weights come from their cache file: 'm' (mapped), 'c'
 * (copied), 'a' (auto: copied where THP and memory allow), or 0 when
 * KVCHAT_PACKED_LOAD is none of map, copy, auto */
static char load_mode(void)
{
    const char *e = getenv("KVCHAT_PACKED_LOAD");
    if (!e || !*e || !strcmp(e, "auto"))
        return 'a';
    return !strcmp(e, "map") ? 'm' : !strcmp(e, "copy") ? 'c' : 0;
}

/* true under a virtio balloon that reports free pages to the host
 * (VIRTIO_BALLOON_F_REPORTING, feature bit 5): the host then takes back
 * free 2 MiB blocks, the very ones a huge page is made of, and a fresh
 * huge page costs its host faults again: 900-1,300 ms of CPU for 525 MB
 * on the VM we measure on (Firecracker, page_reporting_order 9), against
 * 80-100 ms to map the page cache's pages (ext4's large folios) */
static bool host_takes_free_pages(void)
{
    DIR *d = opendir("/sys/bus/virtio/devices");
    if (!d)
        return false;
    bool yes = false;
    struct dirent *e;
    while (!yes && (e = readdir(d))) {
        char path[PATH_MAX], dev[32] = "", feat[160] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/sys/bus/virtio/devices/%.200s/device", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(dev, sizeof dev, f))
                dev[0] = 0;
            fclose(f);
        }
        if (strtol(dev, NULL, 16) != 5) /* VIRTIO_ID_BALLOON */
            continue;
        snprintf(path, sizeof path, "/sys/bus/virtio/devices/%.200s/features", e->d_name);
        if ((f = fopen(path, "r"))) {
            if (!fgets(feat, sizeof feat, f))
                feat[0] = 0;
            fclose(f);
        }
        yes = strlen(feat) > 5 && feat[5] == '1'; /* one character a bit, bit 0 first */
    }
    closedir(d);
    return yes;
}

/* true when the kernel gives madvise(MADV_HUGEPAGE) regions huge pages
 * (THP "always" or "madvise"), the host does not take free pages back
 * (above), and bytes are at most a quarter of the memory this process can
 * take: a copy that large leaves the rest to the KV cache and the page
 * cache (an 18 GB mixture of experts keeps its mapping, and peak RSS stays
 * about file + KV) */
static bool copy_fits(size_t bytes)
{
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    uint64_t avail;
    char what[128];
    return (strstr(mode, "[always]") || strstr(mode, "[madvise]")) && !host_takes_free_pages() &&
           llm_mem_available(&avail, what, sizeof what) && bytes <= avail / 4;
}

/* a loader thread (and the first pass, when it must wait): the cache
 * file's data read piece by piece, in model order, into the copy */
static void *load_worker(void *arg)
{
    struct llm_packed *pk = arg;
    uint8_t *dst = (uint8_t *)pk->data;
    for (size_t k; !atomic_load(&pk->stop_faulting) && (k = atomic_fetch_add(&pk->load_next, 1)) < pk->load_chunks;) {
        size_t off = k * (size_t)LOAD_CHUNK, end = off + LOAD_CHUNK < pk->data_bytes ? off + LOAD_CHUNK : pk->data_bytes;
        while (off < end) {
            ssize_t n = pread(pk->load_fd, dst + off, end - off, (off_t)(HEADER_BYTES + off));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                atomic_store(&pk->load_failed, true);
                break;
            }
            off += (size_t)n;
        }
    }
    return NULL;
}

/* a new anonymous mapping of p->total bytes at a 2 MiB boundary, in huge
 * pages where the kernel allows; NULL, or *map and *map_bytes to unmap */
static uint8_t *map_anon_huge(size_t bytes, void **map, size_t *map_bytes)
{
    size_t len = bytes + LOAD_CHUNK;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + LOAD_CHUNK - 1) & ~(uintptr_t)(LOAD_CHUNK - 1));
#ifdef MADV_HUGEPAGE
    madvise(a, bytes, MADV_HUGEPAGE);
#endif
    *map = p;
    *map_bytes = len;
    return a;
}

/* the cache file fd (header checked) copied by threads in the background
 * into anonymous huge pages; false (nothing started, fd still the
 * caller's) when there is no memory for it */
static bool load_start(struct llm_packed *pk, int fd, size_t data_bytes)
{
    uint8_t *a = map_anon_huge(data_bytes, &pk->map, &pk->map_bytes);
    if (!a)
        return false;
    pk->data = a;
    pk->data_bytes = data_bytes;
    pk->load_fd = fd;
    pk->load_chunks = (data_bytes + LOAD_CHUNK - 1) / LOAD_CHUNK;
    int nt = llm_default_threads();
    nt = nt < 1 ? 1 : nt > LOAD_THREADS_MAX ? LOAD_THREADS_MAX : nt;
    for (int i = 0; i < nt; i++)
        if (pthread_create(&pk->loader[pk->n_loaders], NULL, load_worker, pk) == 0)
            pk->n_loaders++;
    base_trace("packed weights: copy into huge pages started");
    return true; /* no thread at all: the first pass reads it alone */
}

/* the copy finished (the caller helping with what is left); a failed read
 * puts the file's mapping in its place. 0, or -1 when even that fails */
static int load_finish(struct llm_packed *pk)
{
    if (pk->load_fd < 0)
        return 0;
    load_worker(pk);
    for (int i = 0; i < pk->n_loaders; i++)
        pthread_join(pk->loader[i], NULL);
    pk->n_loaders = 0;
    int rc = 0;
    if (atomic_load(&pk->load_failed) && !atomic_load(&pk->stop_faulting)) {
        void *p = mmap((void *)pk->data, pk->data_bytes, PROT_READ, MAP_SHARED | MAP_FIXED, pk->load_fd, HEADER_BYTES);
        rc = p == MAP_FAILED ? -1 : 0;
        base_trace("packed weights: a read failed, the file mapped instead");
    } else {
        base_trace("packed weights: copied into huge pages");
    }
    close(pk->load_fd);
    pk->load_fd = -1;
    return rc;
}

int llm_model_first_pass(const struct llm_model *m)
{
    struct llm_packed *pk = m->packed;
    if (!pk)
        return 0;
    atomic_store_explicit(&pk->stop_touching, true, memory_order_relaxed);
    return load_finish(pk);
}

/* ==== the model's side ==== */

int llm_model_pack(struct llm_model *m, const char *dir, const char *model_path, char *err, size_t err_size)
{
    char mode = load_mode();
    if (!mode) {
        snprintf(err, err_size, "KVCHAT_PACKED_LOAD=%.40s: unknown (choose map, copy or auto)",
                 getenv("KVCHAT_PACKED_LOAD"));
        return -1;
    }
    struct plan p;
    if (plan_make(m, &p)) {
        plan_free(&p);
        snprintf(err, err_size, "out of memory for the packed weights");
        return -1;
    }
    if (!p.nw) {
        plan_free(&p);
        return 0;
    }
    int rc = 0, fd = -1;
    struct llm_packed *pk = calloc(1, sizeof *pk);
    struct pack_header *h = malloc(sizeof *h);
    char file[PATH_MAX], real[PATH_MAX];
    bool cacheable = pk && h && dir && model_path && realpath(model_path, real) &&
                     expected_header(m, real, &p, h) &&
                     cache_name(dir, real, file, sizeof file) == 0;
    if (!pk) {
        rc = -1;
        goto out;
    }
    pk->load_fd = -1;
    if (cacheable && (fd = open_cache(file, h)) >= 0 && mode != 'm' && (mode == 'c' || copy_fits(p.total)) &&
        load_start(pk, fd, p.total)) {
        pk->from_cache = true;
        fd = -1; /* the loaders' until the first pass */
    } else if (fd >= 0 && (pk->map = map_cache(fd, h, &pk->map_bytes))) {
        pk->data = (const uint8_t *)pk->map + HEADER_BYTES;
        pk->from_cache = true;
        madvise(pk->map, pk->map_bytes, MADV_WILLNEED); /* read ahead what is not in the page cache */
#ifdef MADV_HUGEPAGE
        madvise(pk->map, pk->map_bytes, MADV_HUGEPAGE); /* where the file system allows it */
#endif
        if (pthread_create(&pk->faulter, NULL, prefault, pk) == 0)
            pk->faulting = true;
    } else if ((pk->map = pack_in_memory(&p, m->gguf))) {
        pk->map_bytes = p.total;
        pk->data = pk->map;
    } else {
        if (fd >= 0)
            close(fd);
        free(pk);
        pk = NULL;
        rc = -1;
        goto out;
    }
    if (fd >= 0)
        close(fd);
    pk->n_weights = p.nw;
    pk->data_bytes = p.total;
    for (int64_t i = 0; i < p.nw; i++)
        p.w[i]->m.data = pk->data + p.off[i];
    if (cacheable && !pk->from_cache && base_mkdir_p(dir, 0700) == 0) {
        remove_stale_temps(dir);
        pk->file = strdup(file);
        pk->header = h;
        h = NULL;
        if (pk->file && pthread_create(&pk->writer, NULL, write_cache, pk) == 0)
            pk->writing = true;
    }
out:
    if (rc)
        snprintf(err, err_size, "out of memory for the packed weights");
    m->packed = pk;
    free(h);
    plan_free(&p);
    return rc;
}

void llm_model_pack_wait(struct llm_model *m)
{
    struct llm_packed *pk = m->packed;
    if (!pk || !pk->writing)
        return;
    pthread_join(pk->writer, NULL);
    pk->writing = false;
}

void llm_model_unpack(struct llm_model *m)
{
    struct llm_packed *pk = m->packed;
    if (!pk)
        return;
    llm_model_pack_wait(m); /* a first run's exit waits for the file */
    atomic_store(&pk->stop_faulting, true);
    if (pk->faulting)
        pthread_join(pk->faulter, NULL);
    load_finish(pk); /* a model closed before its first pass */
    munmap(pk->map, pk->map_bytes);
    BASE_FREE(pk->file, pk->header, pk);
    m->packed = NULL;
}

int64_t llm_model_packed(const struct llm_model *m, uint64_t *bytes, bool *from_cache)
{
    const struct llm_packed *pk = m->packed;
    *bytes = pk ? pk->data_bytes : 0;
    *from_cache = pk && pk->from_cache;
    return pk ? pk->n_weights : 0;
}
