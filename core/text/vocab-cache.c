/*
 * vocab-cache.c - a vocabulary's tables kept in a cache file, so that a
 * new process maps them instead of building them again.
 *
 * Why: building the tables of a 150k-token BPE vocabulary (its tokens and
 * merges hashed at random into ~12 MB of fresh memory) takes 50-130 ms of
 * every start on the machines measured, which is a third of the first
 * token of a turn resumed in a new `kvchat run -s` process. The tables
 * hold no addresses (texts are offsets into the arena, vocab.h), so the
 * file is mapped as it is: a few hundred microseconds, then a check.
 *
 * The file, $KVCHAT_HOME/packed/HASH.kvvocab, HASH as the model's .kvpack
 * file (the FNV-1a 64-bit hash of the model file's real path), is made
 * for one model file as it is now and one build's table layout:
 *   4096-byte header (struct vocab_header, native byte order, zero-padded):
 *   "KVCVOCB\0", u32 version, u32 the sizes of a token and a merge record;
 *   u64 the model file's size, device, inode, mtime s, mtime ns, ctime s,
 *   ctime ns; u64 the tables' offsets (tokens, merges, token hash, merge
 *   hash, arena, end) from the header's end; u64 the arena's bytes, the
 *   image's bytes, and the checksum (of the header, its checksum zero, and
 *   the image: four 64-bit lanes, sum_words); i32 tokenizer type,
 *   pre-tokenizer, tokens, merges, special tokens, end-of-generation
 *   tokens; u32 the two hash masks and whether there is a merge table;
 *   i32 bos, eos, eot, eom, unk, sep, pad, nl; u8 add_bos, add_eos,
 *   add_space_prefix, clean_spaces, ignore_merges, escape_spaces (gemma4's
 *   U+2581 for ' ': version 1 lost it); the pre-tokenizer's
 *   name (32 bytes); u32 the path's length and the model file's path;
 *   then the image: the tables as vocab.c lays them out in memory, then
 *   the special ids and the end-of-generation ids (i32 each), zero-padded
 *   to a multiple of 32 bytes.
 * A file that does not match (another model file, the file changed, another
 * kvchat's layout), does not have the size its header gives, fails its
 * checksum or any check of its tables (every text inside the arena,
 * NUL-terminated and not empty, every hash entry and id in range, the
 * end-of-generation ids sorted, a free slot in each hash table so that
 * every probe ends) is not used: the vocabulary is
 * built from the GGUF and the file written again (a temporary file synced
 * and renamed in). So a damaged file costs one build, never a crash, a
 * hang or a different token.
 */
#include "core/text/vocab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define VOCAB_FILE_VERSION 2 /* 2: escape_spaces (gemma4) kept */
#define HEADER_BYTES 4096

struct vocab_header {
    char magic[8];
    uint32_t version, record_sizes; /* sizeof token record << 16 | sizeof merge record */
    uint64_t src_size, src_dev, src_ino, src_mtime_s, src_mtime_ns, src_ctime_s, src_ctime_ns;
    uint64_t at[6];
    uint64_t arena_bytes, image_bytes, checksum;
    int32_t type, pre, n_tokens, n_merges, n_special, n_eog;
    uint32_t tok_hash_mask, merge_hash_mask, has_merge_hash;
    int32_t bos, eos, eot, eom, unk, sep, pad, nl;
    uint8_t add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges, escape_spaces, unused[2];
    char pre_name[32];
    uint32_t path_len;
    char path[HEADER_BYTES - 256];
};
_Static_assert(sizeof(struct vocab_header) == HEADER_BYTES, "vocab header size");

/* ==== the checksum: four 64-bit lanes over 32-byte steps ==== */

static uint64_t rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }

/* chained over pieces whose sizes are multiples of 32 */
static void sum_words(uint64_t s[4], const uint8_t *p, size_t n)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * l, 8);
            s[l] = rotl((s[l] ^ w) * k, 29);
        }
}

static uint64_t sum_final(const uint64_t s[4])
{
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int l = 0; l < 4; l++)
        h = rotl((h ^ s[l]) * 0xbf58476d1ce4e5b9ull, 31);
    return h;
}

static void sum_init(uint64_t s[4])
{
    for (int l = 0; l < 4; l++)
        s[l] = 0x6a09e667f3bcc908ull + (uint64_t)l;
}

/* ==== the header ==== */

/* the ids trailing the tables: special then eog, padded to 32 bytes */
static size_t ids_bytes(int64_t n_special, int64_t n_eog)
{
    return ((size_t)(n_special + n_eog) * 4 + 31) / 32 * 32;
}

/* the identity part of the header for the model file g maps at real;
 * false if it has none (a GGUF in memory) */
static bool header_identity(const struct llm_gguf *g, const char *real, struct vocab_header *h)
{
    uint64_t id[4], ct[2];
    size_t len = strlen(real);
    if (!llm_gguf_identity(g, id) || !llm_gguf_ctime(g, ct) || len >= sizeof h->path)
        return false;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "KVCVOCB", 8);
    h->version = VOCAB_FILE_VERSION;
    h->record_sizes = (uint32_t)(sizeof(struct llm_token_data) << 16 | sizeof(struct llm_merge));
    h->src_size = llm_gguf_file_size(g);
    h->src_dev = id[0];
    h->src_ino = id[1];
    h->src_mtime_s = id[2];
    h->src_mtime_ns = id[3];
    h->src_ctime_s = ct[0];
    h->src_ctime_ns = ct[1];
    h->path_len = (uint32_t)len;
    memcpy(h->path, real, len);
    return true;
}

static bool same_identity(const struct vocab_header *a, const struct vocab_header *b)
{
    return !memcmp(a->magic, b->magic, 8) && a->version == b->version && a->record_sizes == b->record_sizes &&
           a->src_size == b->src_size && a->src_dev == b->src_dev && a->src_ino == b->src_ino &&
           a->src_mtime_s == b->src_mtime_s && a->src_mtime_ns == b->src_mtime_ns &&
           a->src_ctime_s == b->src_ctime_s && a->src_ctime_ns == b->src_ctime_ns && a->path_len == b->path_len &&
           !memcmp(a->path, b->path, sizeof a->path);
}

/* ==== reading ==== */

static bool id_ok(int32_t id, int32_t n) { return id == LLM_TOKEN_NULL || (id >= 0 && id < n); }

/* a text inside the arena, NUL-terminated and not empty (as built: an
 * empty token is "[EMPTY_<id>]"; the special-token split needs a length) */
static bool text_ok(const struct llm_vocab *v, uint32_t off, uint32_t len)
{
    return len > 0 && off < v->arena_bytes && len < v->arena_bytes - off && v->arena[off + len] == 0;
}

/* a hash table: entries up to n, and a free slot (every probe ends) */
static bool table_ok(const uint32_t *t, uint32_t slots, int32_t n)
{
    bool free_slot = false;
    for (uint32_t i = 0; i < slots; i++) {
        if (t[i] > (uint32_t)n)
            return false;
        free_slot |= t[i] == 0;
    }
    return free_slot;
}

/* the header's numbers consistent with each other and with a file of
 * file_bytes */
static bool layout_ok(const struct vocab_header *h, uint64_t file_bytes)
{
    const uint64_t *at = h->at;
    uint64_t tslots = (uint64_t)h->tok_hash_mask + 1, mslots = (uint64_t)h->merge_hash_mask + 1;
    if (h->type != LLM_VOCAB_SPM && h->type != LLM_VOCAB_BPE)
        return false;
    if (h->pre < 0 || h->pre >= LLM_PRE_COUNT || h->n_tokens <= 0 || h->n_tokens > (1 << 24) ||
        h->n_merges < 0 || h->n_merges > (1 << 24) || h->n_special < 0 || h->n_special > h->n_tokens ||
        h->n_eog < 0 || h->n_eog > h->n_tokens)
        return false;
    if ((tslots & (tslots - 1)) || tslots <= (uint64_t)h->n_tokens || (mslots & (mslots - 1)) ||
        (h->has_merge_hash ? mslots <= (uint64_t)h->n_merges : h->merge_hash_mask || h->n_merges))
        return false;
    if (at[0] != 0 || h->arena_bytes == 0 || h->arena_bytes > UINT32_MAX)
        return false;
    for (int i = 0; i < 5; i++)
        if (at[i + 1] < at[i] || at[i + 1] % 64 || at[i + 1] > ((uint64_t)1 << 40))
            return false;
    if (at[1] - at[0] < (uint64_t)h->n_tokens * sizeof(struct llm_token_data) ||
        at[2] - at[1] < (uint64_t)h->n_merges * sizeof(struct llm_merge) || at[3] - at[2] < tslots * 4 ||
        (h->has_merge_hash && at[4] - at[3] < mslots * 4) || at[5] - at[4] < h->arena_bytes)
        return false;
    return h->image_bytes == at[5] + ids_bytes(h->n_special, h->n_eog) &&
           file_bytes == HEADER_BYTES + h->image_bytes;
}

/* the vocabulary of the cache file at file if it is the one of want's
 * model file and checks out, else NULL */
static struct llm_vocab *map_cached(const char *file, const struct vocab_header *want)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return NULL;
    struct stat st;
    struct vocab_header h;
    void *map = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= HEADER_BYTES &&
        pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && same_identity(&h, want) &&
        layout_ok(&h, (uint64_t)st.st_size)) {
        /* MAP_POPULATE: the checks below read every page at once */
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (map == MAP_FAILED)
            map = NULL;
    }
    close(fd);
    if (!map)
        return NULL;
    const uint8_t *img = (const uint8_t *)map + HEADER_BYTES;
    struct vocab_header hz = h;
    hz.checksum = 0;
    uint64_t s[4];
    sum_init(s);
    sum_words(s, (const uint8_t *)&hz, sizeof hz);
    sum_words(s, img, h.image_bytes);
    struct llm_vocab *v = sum_final(s) == h.checksum ? calloc(1, sizeof *v) : NULL;
    if (!v) {
        munmap(map, (size_t)st.st_size);
        return NULL;
    }
    v->mem = map;
    v->mem_bytes = (size_t)st.st_size;
    v->from_cache = true;
    v->type = (enum llm_vocab_type)h.type;
    v->pre = (enum llm_pre)h.pre;
    memcpy(v->pre_name, h.pre_name, sizeof v->pre_name);
    v->pre_name[sizeof v->pre_name - 1] = 0;
    v->n_tokens = h.n_tokens;
    v->n_merges = h.n_merges;
    v->tok_hash_mask = h.tok_hash_mask;
    v->merge_hash_mask = h.merge_hash_mask;
    for (int i = 0; i < 6; i++)
        v->at[i] = (size_t)h.at[i];
    v->tokens = (struct llm_token_data *)(img + h.at[0]);
    v->merges = h.n_merges ? (struct llm_merge *)(img + h.at[1]) : NULL;
    v->tok_hash = (uint32_t *)(img + h.at[2]);
    v->merge_hash = h.has_merge_hash ? (uint32_t *)(img + h.at[3]) : NULL;
    v->arena = (char *)(img + h.at[4]);
    v->arena_bytes = (size_t)h.arena_bytes;
    v->special = (int32_t *)(img + h.at[5]);
    v->n_special = h.n_special;
    v->eog = v->special + h.n_special;
    v->n_eog = h.n_eog;
    v->bos = h.bos, v->eos = h.eos, v->eot = h.eot, v->eom = h.eom;
    v->unk = h.unk, v->sep = h.sep, v->pad = h.pad, v->nl = h.nl;
    v->add_bos = h.add_bos, v->add_eos = h.add_eos, v->add_space_prefix = h.add_space_prefix;
    v->clean_spaces = h.clean_spaces, v->ignore_merges = h.ignore_merges, v->escape_spaces = h.escape_spaces;
    /* the tables: what the tokenizers index with, in range */
    bool ok = table_ok(v->tok_hash, v->tok_hash_mask + 1, v->n_tokens) &&
              (!v->merge_hash || table_ok(v->merge_hash, v->merge_hash_mask + 1, v->n_merges));
    int32_t n = v->n_tokens;
    for (int32_t i = 0; ok && i < n; i++)
        ok = text_ok(v, v->tokens[i].off, v->tokens[i].len);
    for (int32_t i = 0; ok && i < v->n_merges; i++)
        ok = text_ok(v, v->merges[i].off, v->merges[i].len) && v->merges[i].split > 0 &&
             v->merges[i].split < v->merges[i].len;
    for (int32_t i = 0; ok && i < v->n_special + v->n_eog; i++)
        ok = v->special[i] >= 0 && v->special[i] < n;
    for (int32_t i = 1; ok && i < v->n_eog; i++) /* sorted, for bsearch */
        ok = v->eog[i - 1] < v->eog[i];
    int32_t ids[] = {v->bos, v->eos, v->eot, v->eom, v->unk, v->sep, v->pad, v->nl};
    for (size_t i = 0; ok && i < sizeof ids / sizeof ids[0]; i++)
        ok = id_ok(ids[i], n);
    if (!ok) {
        llm_vocab_free(v);
        return NULL;
    }
    return v;
}

/* ==== writing ==== */

static void write_cached(const char *dir, const char *file, const struct llm_vocab *v, struct vocab_header *h)
{
    size_t ib = ids_bytes(v->n_special, v->n_eog);
    uint8_t *ids = calloc(1, ib ? ib : 1);
    if (!ids || base_mkdir_p(dir, 0700)) {
        free(ids);
        return;
    }
    memcpy(ids, v->special, (size_t)v->n_special * 4);
    memcpy(ids + (size_t)v->n_special * 4, v->eog, (size_t)v->n_eog * 4);
    for (int i = 0; i < 6; i++)
        h->at[i] = v->at[i];
    h->arena_bytes = v->arena_bytes;
    h->image_bytes = v->at[5] + ib;
    h->type = (int32_t)v->type;
    h->pre = (int32_t)v->pre;
    h->n_tokens = v->n_tokens;
    h->n_merges = v->n_merges;
    h->n_special = v->n_special;
    h->n_eog = v->n_eog;
    h->tok_hash_mask = v->tok_hash_mask;
    h->merge_hash_mask = v->merge_hash_mask;
    h->has_merge_hash = v->merge_hash != NULL;
    h->bos = v->bos, h->eos = v->eos, h->eot = v->eot, h->eom = v->eom;
    h->unk = v->unk, h->sep = v->sep, h->pad = v->pad, h->nl = v->nl;
    h->add_bos = v->add_bos, h->add_eos = v->add_eos, h->add_space_prefix = v->add_space_prefix;
    h->clean_spaces = v->clean_spaces, h->ignore_merges = v->ignore_merges, h->escape_spaces = v->escape_spaces;
    memcpy(h->pre_name, v->pre_name, sizeof h->pre_name);
    /* the checksum: the header with a zero checksum, then the image */
    h->checksum = 0;
    uint64_t s[4];
    sum_init(s);
    sum_words(s, (const uint8_t *)h, sizeof *h);
    sum_words(s, v->mem, v->at[5]);
    sum_words(s, ids, ib);
    h->checksum = sum_final(s);
    struct base_atomic a;
    if (base_atomic_open(&a, file, 0600) == 0) {
        base_atomic_write(&a, h, sizeof *h);
        base_atomic_write(&a, v->mem, v->at[5]);
        base_atomic_write(&a, ids, ib);
        base_atomic_commit(&a);
    } else {
        base_atomic_abort(&a);
    }
    free(ids);
}

/* ==== the public side ==== */

int llm_vocab_cache_file(const char *dir, const char *model_path, char *buf, size_t size)
{
    static const char ext[] = ".kvvocab";
    if (llm_pack_cache_file(dir, model_path, buf, size))
        return -1;
    size_t n = strlen(buf), dot = strlen(".kvpack");
    if (n < dot || strcmp(buf + n - dot, ".kvpack") || n - dot + sizeof ext > size)
        return -1;
    memcpy(buf + n - dot, ext, sizeof ext);
    return 0;
}

int llm_vocab_load_cached(const struct llm_gguf *g, const char *dir, const char *model_path, struct llm_vocab **out,
                          char *err, size_t err_size)
{
    char real[PATH_MAX], file[PATH_MAX + 64];
    struct vocab_header *h = dir && model_path ? malloc(sizeof *h) : NULL;
    bool cacheable = h && realpath(model_path, real) && header_identity(g, real, h) &&
                     llm_vocab_cache_file(dir, real, file, sizeof file) == 0;
    if (cacheable && (*out = map_cached(file, h))) {
        free(h);
        return 0;
    }
    int rc = llm_vocab_load(g, out, err, err_size);
    if (rc == 0 && cacheable)
        write_cached(dir, file, *out, h);
    free(h);
    return rc;
}

bool llm_vocab_from_cache(const struct llm_vocab *v) { return v->from_cache; }
