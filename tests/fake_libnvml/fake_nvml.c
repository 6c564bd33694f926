/* A fake libnvidia-ml.so.1 that NVIDIA's real Python binding (nvidia-ml-py, module pynvml) loads
 * through ctypes, answering from a gputopo snapshot (schema gputopo.topology/1, a JSON file named by
 * the environment variable GPUTOPO_FAKE_NVML_SNAPSHOT, read at the first nvmlInit).
 *
 * It answers the way tests/fake_nvml.py (the Python fake of pynvml) does, so that both fakes give the
 * probe the same Topology; the difference is that this one is reached through the real binding:
 * its symbol names (_v2/_v3), its ctypes structs, its error classes and its string decoding.
 * docs/nvml.md lists the symbols, the optional "fake_nvml" injection section of the snapshot and
 * which answers are NOT_SUPPORTED because a snapshot does not carry them.
 *
 * Built with one call: gcc -shared -fPIC -O1 -o libnvidia-ml.so.1 fake_nvml.c (see the Makefile).
 * Omitting symbols (an older driver) is a linker version script at build time, no code here.
 * Bounded: the file is at most 64 MiB, JSON nesting at most 64 deep, at most 1024 GPUs. Not thread
 * safe (gputopo's probe is single-threaded). */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))
#define MAX_FILE_BYTES (64L << 20)
#define MAX_DEPTH 64
#define MAX_GPUS 1024
#define MAX_SWITCHES 6

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NO_PERMISSION = 4, NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_DRIVER_NOT_LOADED = 9, NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25, NVML_ERROR_UNKNOWN = 999
};
enum { LINK_GPU = 0, LINK_IBMNPU = 1, LINK_SWITCH = 2, LINK_UNKNOWN = 0xFF };

/* ---- a minimal JSON reader ------------------------------------------------------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jval {
    jtype t;
    double num;
    long long inum;
    int is_int, boolean;
    char *str;
    size_t n;
    struct jval *items;
    char **keys;
} jval;

typedef struct {
    const char *p, *end;
    const char *error;
} jparser;

static void jfree(jval *v) {
    if (!v) return;
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static void jskip(jparser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int jput_utf8(char **out, size_t *len, size_t *cap, unsigned cp) {
    char buf[4];
    int k;
    if (cp < 0x80) { buf[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { buf[0] = (char)(0xC0 | (cp >> 6)); buf[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12)); buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F)); k = 3;
    } else {
        buf[0] = (char)(0xF0 | (cp >> 18)); buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[3] = (char)(0x80 | (cp & 0x3F)); k = 4;
    }
    if (*len + (size_t)k + 1 > *cap) {
        size_t ncap = (*cap + (size_t)k + 1) * 2;
        char *grown = realloc(*out, ncap);
        if (!grown) return -1;
        *out = grown;
        *cap = ncap;
    }
    memcpy(*out + *len, buf, (size_t)k);
    *len += (size_t)k;
    (*out)[*len] = 0;
    return 0;
}

static int jhex4(jparser *ps, unsigned *cp) {
    if (ps->end - ps->p < 4) return -1;
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        *cp <<= 4;
        if (c >= '0' && c <= '9') *cp |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') *cp |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *cp |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    return 0;
}

static char *jstring(jparser *ps) {
    size_t len = 0, cap = 16;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    ps->p++; /* the opening quote */
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned cp = (unsigned char)*ps->p++;
        if (cp < 0x20) goto bad;
        if (cp == '\\') {
            if (ps->p >= ps->end) goto bad;
            char e = *ps->p++;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (jhex4(ps, &cp)) goto bad;
                if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                    unsigned low;
                    ps->p += 2;
                    if (jhex4(ps, &low) || low < 0xDC00 || low > 0xDFFF) goto bad;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                if (cp == 0) cp = 0xFFFD; /* no NUL inside C strings */
                break;
            }
            default: goto bad;
            }
            if (jput_utf8(&out, &len, &cap, cp)) goto bad;
        } else {
            char c = (char)cp;
            if (len + 2 > cap) {
                char *grown = realloc(out, cap * 2);
                if (!grown) goto bad;
                out = grown;
                cap *= 2;
            }
            out[len++] = c;
            out[len] = 0;
        }
    }
    if (ps->p >= ps->end) goto bad;
    ps->p++;
    return out;
bad:
    free(out);
    ps->error = "bad string";
    return NULL;
}

static int jvalue(jparser *ps, jval *out, int depth);

static int jcontainer(jparser *ps, jval *out, int depth, int is_obj) {
    char close = is_obj ? '}' : ']';
    size_t cap = 0;
    out->t = is_obj ? J_OBJ : J_ARR;
    ps->p++;
    jskip(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return 0; }
    for (;;) {
        char *key = NULL;
        jskip(ps);
        if (is_obj) {
            if (ps->p >= ps->end || *ps->p != '"') { ps->error = "expected a key"; return -1; }
            if (!(key = jstring(ps))) return -1;
            jskip(ps);
            if (ps->p >= ps->end || *ps->p != ':') { free(key); ps->error = "expected ':'"; return -1; }
            ps->p++;
        }
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            jval *items = realloc(out->items, ncap * sizeof(jval));
            if (!items) { free(key); return -1; }
            out->items = items;
            if (is_obj) {
                char **keys = realloc(out->keys, ncap * sizeof(char *));
                if (!keys) { free(key); return -1; }
                out->keys = keys;
            }
            cap = ncap;
        }
        memset(&out->items[out->n], 0, sizeof(jval));
        if (is_obj) out->keys[out->n] = key;
        out->n++;
        if (jvalue(ps, &out->items[out->n - 1], depth + 1)) return -1;
        jskip(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return 0; }
        ps->error = "expected ',' or a closing bracket";
        return -1;
    }
}

static int jvalue(jparser *ps, jval *out, int depth) {
    if (depth > MAX_DEPTH) { ps->error = "nested too deep"; return -1; }
    jskip(ps);
    if (ps->p >= ps->end) { ps->error = "unexpected end"; return -1; }
    char c = *ps->p;
    if (c == '{' || c == '[') return jcontainer(ps, out, depth, c == '{');
    if (c == '"') {
        out->t = J_STR;
        out->str = jstring(ps);
        return out->str ? 0 : -1;
    }
    static const struct { const char *word; jtype t; int b; } words[] = {
        {"true", J_BOOL, 1}, {"false", J_BOOL, 0}, {"null", J_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= k && !memcmp(ps->p, words[i].word, k)) {
            out->t = words[i].t;
            out->boolean = words[i].b;
            ps->p += k;
            return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char token[64];
        size_t k = 0;
        int is_int = 1;
        while (ps->p < ps->end && k + 1 < sizeof token && strchr("+-0123456789.eE", *ps->p)) {
            if (strchr(".eE", *ps->p)) is_int = 0;
            token[k++] = *ps->p++;
        }
        token[k] = 0;
        char *stop;
        out->t = J_NUM;
        out->num = strtod(token, &stop);
        if (*stop) { ps->error = "bad number"; return -1; }
        out->is_int = is_int;
        /* a fraction or exponent beyond long long's range saturates (a plain cast would be undefined) */
        out->inum = is_int ? strtoll(token, NULL, 10)
                  : out->num >= 0x1p63 ? LLONG_MAX : out->num <= -0x1p63 ? LLONG_MIN : (long long)out->num;
        return 0;
    }
    ps->error = "unexpected character";
    return -1;
}

static const jval *jget(const jval *obj, const char *key) {
    if (!obj || obj->t != J_OBJ) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i].t == J_NULL ? NULL : &obj->items[i];
    return NULL;
}

static const jval *jgeti(const jval *obj, long long key) {
    char text[32];
    snprintf(text, sizeof text, "%lld", key);
    return jget(obj, text);
}

static const char *jstr(const jval *obj, const char *key) {
    const jval *v = jget(obj, key);
    return v && v->t == J_STR ? v->str : NULL;
}

static int jint(const jval *obj, const char *key, long long *out) {
    const jval *v = jget(obj, key);
    if (!v || v->t != J_NUM) return 0;
    *out = v->inum;
    return 1;
}

/* ---- the loaded machine ---------------------------------------------------------------------- */

typedef struct {
    int active, type;
    char bus[40]; /* NVML form: 8-digit domain, upper-case hex */
} fake_link;

typedef struct fake_gpu {
    const jval *gpu;   /* the snapshot's entry */
    const jval *extra; /* fake_nvml.gpus["<local index>"], or NULL */
    int local;
    int has_nvlink, on_switch; /* on_switch: its NVLinks end at NVSwitches */
    fake_link *links;
    int nlinks;
    long long calls, lost_after;
    int lost;
} fake_gpu;

static struct {
    int refcount;
    jval root;
    const jval *fake; /* the "fake_nvml" injection section, or NULL */
    fake_gpu *gpus;
    int count;
    const jval **pairs; /* count*count: the link between two local GPUs */
    char switches[MAX_SWITCHES][40]; /* the NVSwitch chips' bus ids, NVML form (place_switches) */
    jval counters;     /* GPUTOPO_FAKE_NVML_COUNTERS (gputopo watch), J_NULL where none */
    double init_time_s; /* the wall clock at the first nvmlInit: counters count from it */
} S;

static const struct { const char *name; int code; } ERROR_NAMES[] = {
    {"SUCCESS", 0}, {"UNINITIALIZED", 1}, {"INVALID_ARGUMENT", 2}, {"NOT_SUPPORTED", 3},
    {"NO_PERMISSION", 4}, {"ALREADY_INITIALIZED", 5}, {"NOT_FOUND", 6}, {"INSUFFICIENT_SIZE", 7},
    {"INSUFFICIENT_POWER", 8}, {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10}, {"IRQ_ISSUE", 11},
    {"LIBRARY_NOT_FOUND", 12}, {"FUNCTION_NOT_FOUND", 13}, {"CORRUPTED_INFOROM", 14},
    {"GPU_IS_LOST", 15}, {"RESET_REQUIRED", 16}, {"OPERATING_SYSTEM", 17},
    {"LIB_RM_VERSION_MISMATCH", 18}, {"IN_USE", 19}, {"MEMORY", 20}, {"NO_DATA", 21},
    {"INSUFFICIENT_RESOURCES", 23}, {"ARGUMENT_VERSION_MISMATCH", 25}, {"NOT_READY", 27},
    {"GPU_NOT_FOUND", 28}, {"INVALID_STATE", 29}, {"UNKNOWN", 999}};

/* An error named in the injection section: "NOT_SUPPORTED", "NVML_ERROR_NOT_SUPPORTED" or 3. */
static int error_code(const jval *v) {
    if (!v) return NVML_SUCCESS;
    if (v->t == J_NUM) return (int)v->inum;
    if (v->t != J_STR) return NVML_ERROR_UNKNOWN;
    const char *name = v->str;
    if (!strncmp(name, "NVML_ERROR_", 11)) name += 11;
    for (size_t i = 0; i < sizeof ERROR_NAMES / sizeof ERROR_NAMES[0]; i++)
        if (!strcmp(ERROR_NAMES[i].name, name)) return ERROR_NAMES[i].code;
    return NVML_ERROR_UNKNOWN;
}

static void unload(void) {
    for (int i = 0; i < S.count; i++) free(S.gpus[i].links);
    free(S.gpus);
    free(S.pairs);
    jfree(&S.root);
    jfree(&S.counters);
    memset(&S, 0, sizeof S);
}

/* "0000:07:00.0" -> "00000000:07:00.0" (tests/fake_nvml.py nvml_bus_id). */
static void nvml_bus_id(const char *bus, char *out, size_t size) {
    const char *colon = bus ? strchr(bus, ':') : NULL;
    if (!colon) { snprintf(out, size, "%s", bus ? bus : ""); return; }
    unsigned long domain = strtoul(bus, NULL, 16);
    int k = snprintf(out, size, "%08lX:", domain);
    for (const char *c = colon + 1; *c && k + 1 < (int)size; c++) out[k++] = (char)toupper((unsigned char)*c);
    out[k < (int)size ? k : (int)size - 1] = 0;
}

static const char *gpu_bus(const jval *gpu) { return jstr(gpu, "pci_bus_id"); }

static int add_link(fake_gpu *g, int *cap, int type, const char *bus_nvml) {
    if (g->nlinks == *cap) {
        int ncap = *cap ? *cap * 2 : 8;
        fake_link *grown = realloc(g->links, (size_t)ncap * sizeof(fake_link));
        if (!grown) return -1;
        g->links = grown;
        *cap = ncap;
    }
    fake_link *l = &g->links[g->nlinks++];
    l->active = 1;
    l->type = type;
    snprintf(l->bus, sizeof l->bus, "%s", bus_nvml);
    return 0;
}

/* The NVSwitch chips of a baseboard (6 on HGX A100) as tests/fake_nvml.py switch_bus_ids places
 * them: at bus ids c0..ff that no GPU of the snapshot uses, in domain 0000, then 0001, ... (64 GPUs
 * can fill c0..ff of a domain; every GPU fills at most one id, so the loop ends). */
static void place_switches(const jval *gpus) {
    int placed = 0;
    for (size_t n = 0; placed < MAX_SWITCHES; n++) {
        char candidate[40];
        int used = 0;
        snprintf(candidate, sizeof candidate, "%04zx:%02zx:00.0", n / 64, 0xc0 + n % 64);
        for (size_t i = 0; i < gpus->n && !used; i++) {
            const char *other = gpu_bus(&gpus->items[i]);
            used = other && !strcmp(other, candidate);
        }
        if (!used) nvml_bus_id(candidate, S.switches[placed++], sizeof S.switches[0]);
    }
}

/* A GPU's NVLinks as tests/fake_nvml.py FakeNvml._nvlinks_of builds them: direct links to peers
 * (one per NVLink of the pair), then links to NVSwitch chips (place_switches) or, on a machine
 * without NVSwitch, to the CPU (IBM NPU), up to the GPU's active link count. */
static int build_nvlinks(fake_gpu *g, const jval *gpus, const jval *links, const int *local_of) {
    const char *version = jstr(g->gpu, "nvlink_version");
    int cap = 0, on_switch = 0;
    char bus[40];
    g->has_nvlink = version != NULL;
    if (!version) return 0;
    for (size_t k = 0; links && k < links->n; k++) {
        const jval *link = &links->items[k];
        long long a, b, count = 0;
        const jval *nvswitch = jget(link, "nvswitch");
        if (!jint(link, "a", &a) || !jint(link, "b", &b) || a < 0 || b < 0 || a >= MAX_GPUS || b >= MAX_GPUS) continue;
        if (local_of[a] < 0 || local_of[b] < 0) continue;
        long long peer = local_of[a] == g->local ? b : local_of[b] == g->local ? a : -1;
        if (peer < 0 || !jint(link, "nvlink_count", &count) || count <= 0) continue;
        if (nvswitch && nvswitch->t == J_BOOL && nvswitch->boolean) { on_switch = 1; continue; }
        const char *peer_bus = NULL;
        for (size_t i = 0; i < gpus->n; i++) {
            long long index;
            if (jint(&gpus->items[i], "index", &index) && index == peer) peer_bus = gpu_bus(&gpus->items[i]);
        }
        nvml_bus_id(peer_bus, bus, sizeof bus);
        for (long long n = 0; n < count && n < 64; n++)
            if (add_link(g, &cap, LINK_GPU, bus)) return -1;
    }
    long long total = 0;
    if (!jint(g->gpu, "nvlink_active_links", &total) || total == 0) total = g->nlinks;
    if (total > 64) total = 64;
    for (int k = 0; g->nlinks < total; k++) {
        if (on_switch ? add_link(g, &cap, LINK_SWITCH, S.switches[k % MAX_SWITCHES])
                      : add_link(g, &cap, LINK_IBMNPU, "00000000:00:00.0"))
            return -1;
    }
    long long inactive = 0;
    const jval *per_gpu = jgeti(jget(S.fake, "inactive_links"), g->local);
    if (per_gpu && per_gpu->t == J_NUM) inactive = per_gpu->inum;
    for (long long k = 0; k < inactive && k < g->nlinks; k++) g->links[g->nlinks - 1 - k].active = 0;
    for (int k = 0; k < g->nlinks; k++) g->on_switch |= g->links[k].type == LINK_SWITCH;
    return 0;
}

/* 1 for compute capability 9.0 or above (Hopper or newer), 0 below, -1 unknown. */
static int hopper_or_newer(const jval *gpu) {
    const char *text = jstr(gpu, "compute_capability");
    int major;
    if (!text || sscanf(text, "%d", &major) != 1) return -1;
    return major >= 9;
}

static const char *load_error;

static int load(void) {
    const char *path = getenv("GPUTOPO_FAKE_NVML_SNAPSHOT");
    if (!path || !*path) { load_error = "GPUTOPO_FAKE_NVML_SNAPSHOT is not set"; return NVML_ERROR_DRIVER_NOT_LOADED; }
    FILE *f = fopen(path, "rb");
    if (!f) { load_error = "cannot open the snapshot named by GPUTOPO_FAKE_NVML_SNAPSHOT"; return NVML_ERROR_DRIVER_NOT_LOADED; }
    char *text = malloc(MAX_FILE_BYTES + 1);
    size_t size = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    fclose(f);
    if (!text || size > MAX_FILE_BYTES) { free(text); load_error = "snapshot over 64 MiB"; return NVML_ERROR_UNKNOWN; }
    jparser ps = {text, text + size, NULL};
    if (size >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) ps.p += 3;
    memset(&S.root, 0, sizeof S.root);
    int bad = jvalue(&ps, &S.root, 0);
    if (!bad) { jskip(&ps); bad = ps.p != ps.end; }
    free(text);
    const jval *gpus = jget(&S.root, "gpus");
    const char *schema = jstr(&S.root, "schema");
    if (bad || !gpus || gpus->t != J_ARR || !schema || strcmp(schema, "gputopo.topology/1")) {
        jfree(&S.root);
        load_error = "the snapshot is not gputopo.topology/1 JSON";
        return NVML_ERROR_UNKNOWN;
    }
    S.fake = jget(&S.root, "fake_nvml");
    const char *host = jstr(S.fake, "host");
    int *local_of = malloc(MAX_GPUS * sizeof(int));
    S.gpus = calloc(gpus->n ? gpus->n : 1, sizeof(fake_gpu));
    if (!local_of || !S.gpus) { free(local_of); unload(); return NVML_ERROR_UNKNOWN; }
    for (int i = 0; i < MAX_GPUS; i++) local_of[i] = -1;
    for (size_t i = 0; i < gpus->n && S.count < MAX_GPUS; i++) {
        const jval *gpu = &gpus->items[i];
        const char *gpu_host = jstr(gpu, "host");
        long long index;
        if (host && (!gpu_host || strcmp(host, gpu_host))) continue;
        if (!jint(gpu, "index", &index) || index < 0 || index >= MAX_GPUS) continue;
        fake_gpu *g = &S.gpus[S.count];
        g->gpu = gpu;
        g->local = S.count;
        g->extra = jgeti(jget(S.fake, "gpus"), S.count);
        g->lost_after = -1;
        const jval *limit = jgeti(jget(S.fake, "lost_after"), S.count);
        if (limit && limit->t == J_NUM) g->lost_after = limit->inum;
        local_of[index] = S.count++;
    }
    S.pairs = calloc((size_t)S.count * (size_t)(S.count ? S.count : 1), sizeof(jval *));
    const jval *links = jget(&S.root, "links");
    if (!S.pairs) { free(local_of); unload(); return NVML_ERROR_UNKNOWN; }
    for (size_t k = 0; links && links->t == J_ARR && k < links->n; k++) {
        long long a, b;
        if (!jint(&links->items[k], "a", &a) || !jint(&links->items[k], "b", &b)) continue;
        if (a < 0 || b < 0 || a >= MAX_GPUS || b >= MAX_GPUS || local_of[a] < 0 || local_of[b] < 0) continue;
        S.pairs[local_of[a] * S.count + local_of[b]] = &links->items[k];
        S.pairs[local_of[b] * S.count + local_of[a]] = &links->items[k];
    }
    place_switches(gpus);
    for (int i = 0; i < S.count; i++)
        if (build_nvlinks(&S.gpus[i], gpus, links && links->t == J_ARR ? links : NULL, local_of)) {
            free(local_of);
            unload();
            return NVML_ERROR_UNKNOWN;
        }
    free(local_of);
    for (int i = 0; i < S.count; i++)
        if (jget(S.gpus[i].extra, "fabric") && hopper_or_newer(S.gpus[i].gpu) == 0) {
            unload(); /* as tests/fake_nvml.py refuses it: no driver answers a fabric state before Hopper */
            load_error = "a fabric is given for a GPU before Hopper, which answers NOT_SUPPORTED";
            return NVML_ERROR_UNKNOWN;
        }
    return NVML_SUCCESS;
}

/* ---- the bookkeeping every call shares (FakeNvml._enter) ------------------------------------- */

typedef struct fake_gpu *nvmlDevice_t;

static fake_gpu *gpu_of(nvmlDevice_t handle) {
    if (!S.refcount || handle < S.gpus || handle >= S.gpus + S.count) return NULL;
    return handle;
}

/* Initialised? Handles valid? Counts each GPU's calls, loses a GPU after its limit, then the
 * injected error for this call ("name", or "name@<gpu>" for any GPU among the handles). */
static int enter(const char *fn, int nhandles, nvmlDevice_t a, nvmlDevice_t b) {
    nvmlDevice_t handles[2] = {a, b};
    if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
    for (int i = 0; i < nhandles; i++)
        if (!gpu_of(handles[i])) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < nhandles; i++) {
        fake_gpu *g = handles[i];
        g->calls++;
        if (g->lost_after >= 0 && g->calls > g->lost_after) g->lost = 1;
        if (g->lost) return NVML_ERROR_GPU_IS_LOST;
    }
    const jval *errors = jget(S.fake, "errors");
    int rc = error_code(jget(errors, fn));
    for (int i = 0; i < nhandles && !rc; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s@%d", fn, handles[i]->local);
        rc = error_code(jget(errors, key));
    }
    return rc;
}

#define ENTER(fn, n, a, b)                      \
    do {                                        \
        int rc_ = enter(fn, n, a, b);           \
        if (rc_) return rc_;                    \
    } while (0)

static int copy_text(const char *text, char *out, unsigned length) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

static int gpu_int(fake_gpu *g, const char *key, unsigned *out) {
    long long value;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!jint(g->gpu, key, &value)) return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned)value;
    return NVML_SUCCESS;
}

/* ---- counters that move (gputopo watch): tests/fake_nvml_counters.py describes them ---------- */

static double wall_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The file named by GPUTOPO_FAKE_NVML_COUNTERS, if set: {"gpus": {"<index>": {rates...}}}. */
static int load_counters(void) {
    const char *path = getenv("GPUTOPO_FAKE_NVML_COUNTERS");
    memset(&S.counters, 0, sizeof S.counters);
    if (!path || !*path) return NVML_SUCCESS;
    FILE *f = fopen(path, "rb");
    if (!f) { load_error = "cannot open the file named by GPUTOPO_FAKE_NVML_COUNTERS"; return NVML_ERROR_UNKNOWN; }
    char *text = malloc(MAX_FILE_BYTES + 1);
    size_t size = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    fclose(f);
    if (!text || size > MAX_FILE_BYTES) { free(text); load_error = "counters file over 64 MiB"; return NVML_ERROR_UNKNOWN; }
    jparser ps = {text, text + size, NULL};
    int bad = jvalue(&ps, &S.counters, 0);
    if (!bad) { jskip(&ps); bad = ps.p != ps.end; }
    free(text);
    if (bad || S.counters.t != J_OBJ) {
        jfree(&S.counters);
        memset(&S.counters, 0, sizeof S.counters);
        load_error = "the counters file is not a JSON object";
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

/* nvmlFieldValue_t as nvml.h (and pynvml's c_nvmlFieldValue_t) lay it out. */
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType, nvmlReturn;
    union { double dVal; unsigned int uiVal; unsigned long ulVal; unsigned long long ullVal; long long sllVal; } value;
} nvmlFieldValue_t;

/* field id -> the group "unsupported" names, the rate's key, per link?, bytes per unit (as FIELDS). */
static const struct { unsigned id; const char *group, *key; int per_link; double unit; } FIELDS[] = {
    {138, "nvlink_throughput", "nvlink_tx_bytes_per_s", 1, 1024}, {139, "nvlink_throughput", "nvlink_rx_bytes_per_s", 1, 1024},
    {161, "nvlink_errors", "nvlink_replay_errors_per_s", 1, 1}, {162, "nvlink_errors", "nvlink_recovery_errors_per_s", 1, 1},
    {163, "nvlink_errors", "nvlink_crc_errors_per_s", 1, 1}, {94, "pcie_replay", "pcie_replay_errors_per_s", 0, 1},
    {197, "pcie_count", "pcie_tx_bytes_per_s", 0, 1}, {198, "pcie_count", "pcie_rx_bytes_per_s", 0, 1}};

static double jnumber(const jval *v) { return v && v->t == J_NUM ? v->num : 0.0; }

/* One field of one GPU: its return code, and the cumulative value in *out. */
static int field_value(fake_gpu *g, unsigned id, unsigned scope, double elapsed_s, unsigned long long *out) {
    const jval *script = jgeti(jget(&S.counters, "gpus"), g->local);
    *out = 0;
    for (size_t f = 0; f < sizeof FIELDS / sizeof FIELDS[0]; f++) {
        if (FIELDS[f].id != id) continue;
        const jval *unsupported = jget(script, "unsupported");
        for (size_t i = 0; unsupported && unsupported->t == J_ARR && i < unsupported->n; i++)
            if (unsupported->items[i].t == J_STR && !strcmp(unsupported->items[i].str, FIELDS[f].group))
                return NVML_ERROR_NOT_SUPPORTED;
        const jval *rate = jget(script, FIELDS[f].key);
        if (FIELDS[f].per_link) {
            if (!g->has_nvlink) return NVML_ERROR_NOT_SUPPORTED;
            if (scope >= (unsigned)g->nlinks) return NVML_ERROR_INVALID_ARGUMENT;
            if (!g->links[scope].active) return NVML_ERROR_NOT_SUPPORTED;
            rate = jgeti(rate, scope);
        }
        double value = jnumber(rate) * (elapsed_s > 0 ? elapsed_s : 0) / FIELDS[f].unit;
        *out = value > 0 ? (unsigned long long)value : 0; /* truncation: floor of a positive value */
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_SUPPORTED;
}

API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
    ENTER("nvmlDeviceGetFieldValues", 1, device, NULL);
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    double now_s = wall_clock_s();
    for (int i = 0; i < count; i++) {
        unsigned long long value;
        int rc = field_value(device, values[i].fieldId, values[i].scopeId, now_s - S.init_time_s, &value);
        values[i].nvmlReturn = rc;
        values[i].timestamp = rc ? 0 : (long long)(now_s * 1e6);
        values[i].latencyUsec = 0;
        values[i].valueType = 3; /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG */
        values[i].value.ullVal = value;
    }
    return NVML_SUCCESS;
}

/* The PCIe fallback: KiB/s (counter 0 TX, 1 RX) as fake_nvml_counters.pcie_throughput answers it. */
API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value) {
    ENTER("nvmlDeviceGetPcieThroughput", 1, device, NULL);
    if (!value) return NVML_ERROR_INVALID_ARGUMENT;
    const jval *script = jgeti(jget(&S.counters, "gpus"), device->local);
    const jval *unsupported = jget(script, "unsupported");
    if (counter != 0 && counter != 1) return NVML_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; unsupported && unsupported->t == J_ARR && i < unsupported->n; i++)
        if (unsupported->items[i].t == J_STR && !strcmp(unsupported->items[i].str, "pcie_throughput"))
            return NVML_ERROR_NOT_SUPPORTED;
    double rate = jnumber(jget(script, counter == 0 ? "pcie_tx_bytes_per_s" : "pcie_rx_bytes_per_s")) / 1024;
    *value = rate > 0 ? (unsigned int)rate : 0; /* truncation: floor of a positive value */
    return NVML_SUCCESS;
}

/* ---- init, shutdown, errors, system ---------------------------------------------------------- */

API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (S.refcount) { S.refcount++; return NVML_SUCCESS; }
    int rc = load();
    if (rc) {
        fprintf(stderr, "fake libnvidia-ml: %s\n", load_error ? load_error : "out of memory");
        return rc;
    }
    rc = error_code(jget(S.fake, "init_error"));
    if (rc) { unload(); return rc; }
    rc = load_counters();
    if (rc) { fprintf(stderr, "fake libnvidia-ml: %s\n", load_error); unload(); return rc; }
    S.init_time_s = wall_clock_s();
    S.refcount = 1;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
API nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

API nvmlReturn_t nvmlShutdown(void) {
    if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
    if (--S.refcount == 0) unload();
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t result) {
    static const struct { int code; const char *text; } texts[] = {
        {0, "Success"}, {1, "Uninitialized"}, {2, "Invalid Argument"}, {3, "Not Supported"},
        {4, "Insufficient Permissions"}, {5, "Already Initialized"}, {6, "Not Found"},
        {7, "Insufficient Size"}, {8, "Insufficient External Power"}, {9, "Driver Not Loaded"},
        {10, "Timeout"}, {11, "Interrupt Request Issue"}, {12, "NVML Shared Library Not Found"},
        {13, "Function Not Found"}, {14, "Corrupted infoROM"}, {15, "GPU is lost"},
        {16, "GPU requires restart"}, {17, "The operating system has blocked the request."},
        {18, "RM has detected an NVML/RM version mismatch."}, {19, "In use by another client"},
        {20, "Insufficient Memory"}, {21, "No data"}, {25, "Argument version mismatch"},
        {999, "Unknown Error"}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (texts[i].code == result) return texts[i].text;
    return "Unknown Error";
}

static const char *driver_version(void) {
    const char *v = jstr(S.fake, "driver_version");
    if (!v) v = jstr(&S.root, "driver_version");
    return v ? v : "550.54.15";
}

static int cuda_version(void) {
    long long v;
    if (jint(S.fake, "cuda_driver_version", &v)) return (int)v;
    const char *text = jstr(&S.root, "cuda_driver_version"); /* "12.4" */
    int major, minor;
    if (text && sscanf(text, "%d.%d", &major, &minor) == 2) return major * 1000 + minor * 10;
    return 12040;
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER("nvmlSystemGetDriverVersion", 0, NULL, NULL);
    return copy_text(driver_version(), version, length);
}

API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    char text[128];
    ENTER("nvmlSystemGetNVMLVersion", 0, NULL, NULL);
    const char *given = jstr(S.fake, "nvml_version");
    if (!given) given = jstr(&S.root, "nvml_version");
    if (given) snprintf(text, sizeof text, "%s", given);
    else snprintf(text, sizeof text, "%d.%s", cuda_version() / 1000, driver_version());
    return copy_text(text, version, length);
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    ENTER("nvmlSystemGetCudaDriverVersion", 0, NULL, NULL);
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    *version = cuda_version();
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    ENTER("nvmlSystemGetProcessName", 0, NULL, NULL);
    for (int i = 0; i < S.count; i++) {
        const jval *procs = jget(S.gpus[i].extra, "processes");
        for (size_t k = 0; procs && procs->t == J_ARR && k < procs->n; k++) {
            long long p;
            const char *text = jstr(&procs->items[k], "name");
            if (text && jint(&procs->items[k], "pid", &p) && p == (long long)pid) return copy_text(text, name, length);
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* ---- devices ---------------------------------------------------------------------------------- */

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    ENTER("nvmlDeviceGetCount", 0, NULL, NULL);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)S.count;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    ENTER("nvmlDeviceGetHandleByIndex", 0, NULL, NULL);
    if (!device || index >= (unsigned)S.count) return NVML_ERROR_INVALID_ARGUMENT;
    char key[64];
    snprintf(key, sizeof key, "nvmlDeviceGetHandleByIndex@%u", index);
    int rc = error_code(jget(jget(S.fake, "errors"), key));
    if (rc) return rc;
    *device = &S.gpus[index];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static int gpu_text(const char *fn, nvmlDevice_t device, const char *key, char *out, unsigned length) {
    ENTER(fn, 1, device, NULL);
    const char *text = jstr(device->gpu, key);
    return text ? copy_text(text, out, length) : NVML_ERROR_NOT_SUPPORTED;
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    return gpu_text("nvmlDeviceGetName", device, "name", name, length);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    return gpu_text("nvmlDeviceGetUUID", device, "uuid", uuid, length);
}

/* nvmlPciInfo_t as nvidia-ml-py 13 declares it (pynvml.py class nvmlPciInfo_t): the 16-byte
 * busIdLegacy first, the 32-byte busId last (NVML 9.0 moved it there; _v1/_v2 have 16 bytes of
 * reserved fields instead). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

static void fill_pci(nvmlPciInfo_t *info, const char *nvml_bus, int with_long_id) {
    char domain[16] = "", bus[8] = "", rest[16] = "";
    memset(info, 0, with_long_id ? sizeof *info : offsetof(nvmlPciInfo_t, busId));
    if (sscanf(nvml_bus, "%15[0-9A-Fa-f]:%7[0-9A-Fa-f]:%15s", domain, bus, rest) == 3) {
        info->domain = (unsigned)strtoul(domain, NULL, 16);
        info->bus = (unsigned)strtoul(bus, NULL, 16);
        info->device = (unsigned)strtoul(rest, NULL, 16);
        char legacy[64];
        snprintf(legacy, sizeof legacy, "%04X:%s:%s", info->domain, bus, rest);
        memcpy(info->busIdLegacy, legacy, strnlen(legacy, sizeof info->busIdLegacy - 1)); /* NUL from memset */
    }
    if (with_long_id) snprintf(info->busId, sizeof info->busId, "%s", nvml_bus);
}

static int pci_info(const char *fn, nvmlDevice_t device, nvmlPciInfo_t *pci, int with_long_id) {
    char bus[40];
    ENTER(fn, 1, device, NULL);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    const char *text = gpu_bus(device->gpu);
    if (!text) return NVML_ERROR_NOT_SUPPORTED;
    nvml_bus_id(text, bus, sizeof bus);
    fill_pci(pci, bus, with_long_id);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info("nvmlDeviceGetPciInfo", device, pci, 1);
}
API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info("nvmlDeviceGetPciInfo", device, pci, 0);
}
API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info("nvmlDeviceGetPciInfo", device, pci, 0);
}

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

/* used: what processes hold (nvidia-smi's "Used"); reserved: the driver's own reserve, which version 1
 * counts as used (a real idle H200 answered 616 MiB used to version 1, 0 to version 2). */
static int memory(nvmlDevice_t device, unsigned long long *total, unsigned long long *used,
                  unsigned long long *reserved) {
    long long value, in_use = 0, kept = 0;
    ENTER("nvmlDeviceGetMemoryInfo", 1, device, NULL);
    if (!jint(device->gpu, "memory_total_bytes", &value)) return NVML_ERROR_NOT_SUPPORTED;
    jint(device->extra, "memory_used_bytes", &in_use);
    jint(device->extra, "memory_reserved_bytes", &kept);
    *total = (unsigned long long)value;
    *used = (unsigned long long)in_use;
    *reserved = (unsigned long long)kept;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *out) {
    unsigned long long total, used, reserved;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    int rc = memory(device, &total, &used, &reserved);
    if (rc) return rc;
    out->total = total, out->used = used + reserved, out->free = total - used - reserved;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *out) {
    unsigned long long total, used, reserved;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    int rc = memory(device, &total, &used, &reserved);
    if (rc) return rc;
    out->total = total, out->reserved = reserved, out->used = used, out->free = total - used - reserved;
    return NVML_SUCCESS;
}

/* A cpulist ("0-55,112-167") into 64-bit words; bits past the caller's buffer are dropped. */
static int set_mask(const char *list, unsigned int words, unsigned long *mask) {
    if (!mask || words == 0) return NVML_ERROR_INVALID_ARGUMENT;
    memset(mask, 0, words * sizeof *mask);
    const char *p = list;
    while (*p == ' ') p++;
    if (!*p || !strcmp(p, "N/A")) return NVML_SUCCESS;
    while (*p) {
        char *stop;
        long lo = strtol(p, &stop, 10), hi = lo;
        if (stop == p || lo < 0) return NVML_ERROR_UNKNOWN;
        p = stop;
        if (*p == '-') {
            hi = strtol(p + 1, &stop, 10);
            if (stop == p + 1 || hi < lo) return NVML_ERROR_UNKNOWN;
            p = stop;
        }
        for (long cpu = lo; cpu <= hi && cpu < 64L * words; cpu++) mask[cpu / 64] |= 1UL << (cpu % 64);
        if (*p == ',') p++;
        else if (*p && *p != ' ' && *p != '\n') return NVML_ERROR_UNKNOWN;
        else break;
    }
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet) {
    ENTER("nvmlDeviceGetCpuAffinity", 1, device, NULL);
    const char *list = jstr(device->gpu, "cpu_affinity");
    return list ? set_mask(list, cpuSetSize, cpuSet) : NVML_ERROR_NOT_SUPPORTED;
}

API nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long *nodeSet,
                                             unsigned int scope) {
    long long node;
    char text[32];
    ENTER("nvmlDeviceGetMemoryAffinity", 1, device, NULL);
    if (scope > 1) return NVML_ERROR_INVALID_ARGUMENT; /* NODE 0, SOCKET 1 */
    if (!jint(device->gpu, "numa_node", &node)) return NVML_ERROR_NOT_SUPPORTED;
    snprintf(text, sizeof text, "%lld", node);
    return set_mask(text, nodeSetSize, nodeSet);
}

API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node) {
    ENTER("nvmlDeviceGetNumaNodeId", 1, device, NULL);
    const jval *id = jgeti(jget(S.fake, "gpu_numa_ids"), device->local);
    if (!node) return NVML_ERROR_INVALID_ARGUMENT;
    if (!id || id->t != J_NUM) return NVML_ERROR_NOT_SUPPORTED; /* only where the GPU is a NUMA node */
    *node = (unsigned)id->inum;
    return NVML_SUCCESS;
}

#define PCIE_GETTER(symbol, key)                                   \
    API nvmlReturn_t symbol(nvmlDevice_t device, unsigned int *value) { \
        ENTER(#symbol, 1, device, NULL);                           \
        return gpu_int(device, key, value);                        \
    }
PCIE_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie_gen_current")
PCIE_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "pcie_gen_max")
PCIE_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie_width_current")
PCIE_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "pcie_width_max")

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    static const char *capable[] = {"A100", "A30", "H100", "H200", "H800", "B200", "GB200"};
    ENTER("nvmlDeviceGetMigMode", 1, device, NULL);
    const char *name = jstr(device->gpu, "name");
    const jval *mode = jget(device->gpu, "mig_mode");
    int has_mig = 0;
    for (size_t i = 0; name && i < sizeof capable / sizeof capable[0]; i++) has_mig |= strstr(name, capable[i]) != NULL;
    if (!has_mig || !mode || mode->t != J_BOOL) return NVML_ERROR_NOT_SUPPORTED;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = (unsigned)mode->boolean;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    ENTER("nvmlDeviceGetCudaComputeCapability", 1, device, NULL);
    const char *text = jstr(device->gpu, "compute_capability");
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (!text || sscanf(text, "%d.%d", major, minor) != 2) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* ---- NVLink ------------------------------------------------------------------------------------ */

static int nvlink(const char *fn, nvmlDevice_t device, unsigned int link, fake_link **out) {
    ENTER(fn, 1, device, NULL);
    if (!device->has_nvlink) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned)device->nlinks) return NVML_ERROR_INVALID_ARGUMENT;
    *out = &device->links[link];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int *isActive) {
    fake_link *l;
    int rc = nvlink("nvmlDeviceGetNvLinkState", device, link, &l);
    if (rc) return rc;
    if (!isActive) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = (unsigned)l->active;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version) {
    static const char *versions[] = {"1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0", "6.0"};
    fake_link *l;
    int rc = nvlink("nvmlDeviceGetNvLinkVersion", device, link, &l);
    if (rc) return rc;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    const char *text = jstr(device->gpu, "nvlink_version");
    *version = 0; /* NVML_NVLINK_VERSION_INVALID */
    for (unsigned i = 0; text && i < sizeof versions / sizeof versions[0]; i++)
        if (!strcmp(text, versions[i])) *version = i + 1;
    return NVML_SUCCESS;
}

static int remote_pci(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci, int with_long_id) {
    fake_link *l;
    int rc = nvlink("nvmlDeviceGetNvLinkRemotePciInfo", device, link, &l);
    if (rc) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->active) return NVML_ERROR_NOT_SUPPORTED;
    fill_pci(pci, l->bus, with_long_id);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    return remote_pci(device, link, pci, 1);
}
API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    return remote_pci(device, link, pci, 0);
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link, unsigned int *type) {
    fake_link *l;
    int rc = nvlink("nvmlDeviceGetNvLinkRemoteDeviceType", device, link, &l);
    if (rc) return rc;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = l->active ? (unsigned)l->type : LINK_UNKNOWN;
    return NVML_SUCCESS;
}

/* From the injection section, fake_nvml.gpus["<i>"].nvlink_errors["<link>"]["<counter>"]; a count not
 * given is 0, as an active link counts nothing yet (tests/fake_nvml.py answers the same). */
API nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, unsigned int counter,
                                                 unsigned long long *value) {
    fake_link *l;
    long long count;
    char key[16];
    int rc = nvlink("nvmlDeviceGetNvLinkErrorCounter", device, link, &l);
    if (rc) return rc;
    if (!value || counter > 4) return NVML_ERROR_INVALID_ARGUMENT; /* NVML_NVLINK_ERROR_DL_* 0..4 */
    if (!l->active) return NVML_ERROR_NOT_SUPPORTED;
    snprintf(key, sizeof key, "%u", counter);
    if (!jint(jgeti(jget(device->extra, "nvlink_errors"), link), key, &count)) count = 0;
    *value = (unsigned long long)count;
    return NVML_SUCCESS;
}

/* ---- pairs ------------------------------------------------------------------------------------- */

static const jval *pair_link(nvmlDevice_t a, nvmlDevice_t b) { return S.pairs[a->local * S.count + b->local]; }

API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    static const struct { const char *word; int level; } levels[] = {
        {"PIX", 10}, {"PXB", 20}, {"PHB", 30}, {"NODE", 40}, {"SYS", 50}};
    ENTER("nvmlDeviceGetTopologyCommonAncestor", 2, a, b);
    if (a == b || !level) return NVML_ERROR_INVALID_ARGUMENT;
    char key[32];
    snprintf(key, sizeof key, "%d-%d", a->local < b->local ? a->local : b->local, a->local < b->local ? b->local : a->local);
    long long forced;
    if (jint(jget(S.fake, "ancestor_overrides"), key, &forced)) { *level = (int)forced; return NVML_SUCCESS; }
    const jval *link = pair_link(a, b);
    const char *path = jstr(link, "pcie_path");
    const char *type = jstr(link, "type");
    if (!path && type && strncmp(type, "NV", 2)) path = type; /* a PCIe word as the link type */
    for (size_t i = 0; path && i < sizeof levels / sizeof levels[0]; i++)
        if (!strcmp(path, levels[i].word)) { *level = levels[i].level; return NVML_SUCCESS; }
    return NVML_ERROR_NOT_SUPPORTED;
}

API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps, int *status) {
    static const char *fields[] = {"p2p_read", "p2p_write", "p2p_nvlink", "p2p_atomics", "p2p_read"};
    static const char *words[] = {"ok", "CNS", "GNS", "TNS", "DR", "NS", "U"};
    ENTER("nvmlDeviceGetP2PStatus", 2, a, b);
    if (a == b || caps < 0 || caps > 4 || !status) return NVML_ERROR_INVALID_ARGUMENT;
    const char *word = jstr(pair_link(a, b), fields[caps]);
    if (!word) return NVML_ERROR_NOT_SUPPORTED;
    for (int i = 0; i < 7; i++)
        if (!strcmp(word, words[i])) { *status = i; return NVML_SUCCESS; }
    return NVML_ERROR_UNKNOWN;
}

/* ---- for doctor: fabric, performance state, utilization, processes (only from the injection section) */

/* As nvml.h declares them: the state is an nvmlGpuFabricState_t, one unsigned char (pynvml reads it
 * as a c_uint over the padding the caller's zeroed structure holds). */
typedef struct {
    unsigned char clusterUuid[16];
    int status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    int status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary; /* v3 only */
} nvmlGpuFabricInfo_v3_t;

#define FABRIC_INFO_V2 0x02000024u /* pynvml nvmlGpuFabricInfo_v2: version 2, 36 bytes */
#define FABRIC_INFO_V3 0x03000028u /* pynvml nvmlGpuFabricInfo_v3: version 3, 40 bytes */

/* A driver before R525 has no nvmlDeviceGetGpuFabricInfo, one before R550 no ...InfoV: the binding
 * finds no symbol and raises FunctionNotFound before NVML is asked anything. */
static int fabric_symbol(int since_driver) {
    if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
    int major = atoi(driver_version());
    return major > 0 && major < since_driver ? NVML_ERROR_FUNCTION_NOT_FOUND : NVML_SUCCESS;
}

/* What the real driver answers, as tests/fake_nvml.py fabric_answer() (the sources are cited there):
 * a driver before R525 (R550 for the V call) has no such function; a GPU before Hopper (compute
 * capability below 9.0, or unknown) NOT_SUPPORTED; a Hopper or newer GPU SUCCESS with state
 * NOT_SUPPORTED off any NVSwitch (a real H200 alone in a VM), COMPLETED where its NVLinks end at
 * NVSwitches; the injection section's gpus.N.fabric, where given, says what it answers. */
static int fabric(const char *fn, nvmlDevice_t device, unsigned char uuid[16], int *status,
                  unsigned *clique, unsigned char *state, unsigned *health_mask, unsigned *summary) {
    static const char *states[] = {"NOT_SUPPORTED", "NOT_STARTED", "IN_PROGRESS", "COMPLETED"};
    long long value;
    ENTER(fn, 1, device, NULL);
    const jval *info = jget(device->extra, "fabric");
    memset(uuid, 0, 16);
    *status = NVML_SUCCESS;
    *clique = *health_mask = *summary = 0;
    if (!info) {
        if (hopper_or_newer(device->gpu) != 1) return NVML_ERROR_NOT_SUPPORTED;
        *state = device->on_switch ? 3 : 0; /* COMPLETED : NOT_SUPPORTED */
        return NVML_SUCCESS;
    }
    const jval *st = jget(info, "state");
    *state = 0;
    if (st && st->t == J_NUM) *state = (unsigned char)st->inum;
    for (unsigned char i = 0; st && st->t == J_STR && i < 4; i++)
        if (!strcmp(st->str, states[i])) *state = i;
    *status = error_code(jget(info, "status"));
    *clique = jint(info, "clique_id", &value) ? (unsigned)value : 0;
    *health_mask = jint(info, "health_mask", &value) ? (unsigned)value : 0;
    *summary = jint(info, "health_summary", &value) ? (unsigned)value : 0;
    const char *text = jstr(info, "cluster_uuid");
    for (int k = 0, n = 0; text && text[k] && n < 32; k++) {
        if (!isxdigit((unsigned char)text[k])) continue;
        unsigned digit = (unsigned)(isdigit((unsigned char)text[k]) ? text[k] - '0' : (tolower((unsigned char)text[k]) - 'a' + 10));
        uuid[n / 2] |= (unsigned char)(n % 2 ? digit : digit << 4);
        n++;
    }
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *out) {
    unsigned mask, summary;
    int rc = fabric_symbol(525);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    return fabric("nvmlDeviceGetGpuFabricInfo", device, out->clusterUuid, &out->status, &out->cliqueId,
                  &out->state, &mask, &summary);
}

API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfo_v3_t *out) {
    unsigned summary;
    int rc = fabric_symbol(550);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != FABRIC_INFO_V2 && out->version != FABRIC_INFO_V3) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    rc = fabric("nvmlDeviceGetGpuFabricInfoV", device, out->clusterUuid, &out->status, &out->cliqueId,
                    &out->state, &out->healthMask, &summary);
    if (!rc && out->version == FABRIC_INFO_V3) out->healthSummary = (unsigned char)summary;
    return rc;
}

/* The device file's minor number (/dev/nvidiaN); a GPU without one answers NOT_SUPPORTED (as on Windows). */
API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    long long value;
    ENTER("nvmlDeviceGetMinorNumber", 1, device, NULL);
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (!jint(device->gpu, "minor_number", &value)) return NVML_ERROR_NOT_SUPPORTED;
    *minor = (unsigned)value;
    return NVML_SUCCESS;
}

/* nvmlPstates_t: 0 (P0, the most performance) .. 15, 32 unknown; a GPU without one answers NOT_SUPPORTED. */
API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, unsigned int *state) {
    long long value;
    ENTER("nvmlDeviceGetPerformanceState", 1, device, NULL);
    if (!state) return NVML_ERROR_INVALID_ARGUMENT;
    if (!jint(device->extra, "performance_state", &value)) return NVML_ERROR_NOT_SUPPORTED;
    *state = (unsigned)value;
    return NVML_SUCCESS;
}

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *out) {
    long long gpu, mem;
    ENTER("nvmlDeviceGetUtilizationRates", 1, device, NULL);
    const jval *util = jget(device->extra, "utilization");
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!jint(util, "gpu", &gpu) || !jint(util, "memory", &mem)) return NVML_ERROR_NOT_SUPPORTED;
    out->gpu = (unsigned)gpu, out->memory = (unsigned)mem;
    return NVML_SUCCESS;
}

/* nvmlProcessInfo_t (v2 and v3 have one layout in pynvml: c_nvmlProcessInfo_v3_t = _v2_t). */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

static int processes(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos) {
    ENTER("nvmlDeviceGetComputeRunningProcesses", 1, device, NULL);
    const jval *procs = jget(device->extra, "processes");
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!procs || procs->t != J_ARR) return NVML_ERROR_NOT_SUPPORTED;
    unsigned n = (unsigned)procs->n, room = *count;
    *count = n;
    if (n == 0) return NVML_SUCCESS;
    if (!infos || room < n) return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned k = 0; k < n; k++) {
        long long pid = 0, used;
        jint(&procs->items[k], "pid", &pid);
        infos[k].pid = (unsigned)pid;
        infos[k].usedGpuMemory = jint(&procs->items[k], "used_memory_bytes", &used) ? (unsigned long long)used : ULLONG_MAX;
        infos[k].gpuInstanceId = infos[k].computeInstanceId = 0xFFFFFFFFu; /* not in a MIG instance */
    }
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p) {
    return processes(d, c, p);
}
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p) {
    return processes(d, c, p);
}
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *p) {
    return processes(d, c, p);
}
