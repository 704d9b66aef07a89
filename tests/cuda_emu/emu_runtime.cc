/* emu_runtime.cc - the CUDA runtime subset kiln calls, emulated on the CPU, and the block scheduler that runs
 * kernels (see kcu_emu.h for what is emulated and checked).
 *
 * Device memory: each cudaMalloc is its own mapping, its end against a guard page, and it is readable and
 * writable only inside device work (a kernel, a copy, a memset, a GEMM: device_section). Host code that
 * dereferences device memory, or a kernel that runs past the end of an allocation, faults; the SIGSEGV handler
 * says which allocation and which kernel, block and thread, then aborts. KCU_EMU_PROTECT=0 leaves device memory
 * readable by the host (to bisect a failure).
 *
 * The emulated device (environment): KCU_EMU_DEVICES (1), KCU_EMU_CC (90: compute capability, which also sets
 * the opt-in shared-memory limit per block from the CUDA C++ Programming Guide's table: 8.0 163 KB, 8.6 / 8.9 /
 * 12.0 99 KB, 9.0 227 KB), KCU_EMU_MEM_MB (8192), KCU_EMU_ORDER (forward | reverse). */
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu_fiber.h"
#include "emu_internal.h"
#include "kcu_emu.h"

namespace kcu_emu {

/* ---- the emulated device ---------------------------------------------------------------------------------- */

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

struct device_config {
    int count, cc;
    size_t optin, total;
    bool protect, reverse;
};

static const device_config &cfg() {
    static device_config c = [] {
        device_config d;
        d.count = env_int("KCU_EMU_DEVICES", 1);
        d.cc = env_int("KCU_EMU_CC", 90);
        /* sharedMemPerBlockOptin per compute capability (bytes) */
        d.optin = d.cc == 80 ? 166912 : d.cc == 87 ? 166912 : d.cc >= 90 && d.cc < 100 ? 232448 : 101376;
        d.total = (size_t)env_int("KCU_EMU_MEM_MB", 8192) << 20;
        d.protect = env_int("KCU_EMU_PROTECT", 1) != 0;
        const char *o = getenv("KCU_EMU_ORDER");
        d.reverse = o && !strcmp(o, "reverse");
        return d;
    }();
    return c;
}

long long device_cc() { return cfg().cc; }

__thread const uint3 *cur_tid, *cur_bid;
__thread int cur_lane;
__thread const launch_state *cur_launch;
struct thread_state;
struct block_state;
static __thread thread_state *cur_thread;
static __thread block_state *cur_block;
static thread_local cudaError_t last_error = cudaSuccess;
static thread_local int cur_device = 0;

cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

/* ---- device memory ---------------------------------------------------------------------------------------- */

struct allocation {
    uintptr_t base; /* what cudaMalloc returned */
    size_t size;    /* what was asked */
    char *map;      /* the mapping: [map, map + usable) then one guard page */
    size_t usable;
    uint64_t id;
};

static std::recursive_mutex gpu_mutex; /* device work: one host thread at a time */
static std::mutex table_mutex;
static std::map<uintptr_t, allocation> allocs; /* by base */
static std::map<uintptr_t, size_t> pinned;     /* cudaHostAlloc: host memory, by base */
static std::map<uintptr_t, size_t> freed;      /* cudaFree'd device ranges, never reused: by base */
static size_t allocated_bytes;
static uint64_t alloc_serial;
static int device_depth; /* inside device_section (under gpu_mutex) */
static size_t page_bytes;

static void protect_all(int prot) {
    if (!cfg().protect) return;
    for (auto &kv : allocs)
        if (mprotect(kv.second.map, kv.second.usable, prot) != 0) fatal("mprotect: %s", strerror(errno));
}

device_section::device_section() {
    gpu_mutex.lock();
    std::lock_guard<std::mutex> g(table_mutex);
    if (device_depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
}

device_section::~device_section() {
    {
        std::lock_guard<std::mutex> g(table_mutex);
        if (--device_depth == 0) protect_all(PROT_NONE);
    }
    gpu_mutex.unlock();
}

static const allocation *find_alloc_locked(uintptr_t a, bool with_guard) {
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return nullptr;
    --it;
    const allocation &al = it->second;
    uintptr_t end = with_guard ? (uintptr_t)al.map + al.usable + page_bytes : al.base + al.size;
    uintptr_t lo = with_guard ? (uintptr_t)al.map : al.base;
    return a >= lo && a < end ? &al : nullptr;
}

bool device_range(const void *p, size_t bytes, uintptr_t *base, size_t *size) {
    std::lock_guard<std::mutex> g(table_mutex);
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return false;
    --it;
    const allocation &al = it->second;
    if (a < al.base || a - al.base > al.size || bytes > al.size - (a - al.base)) return false;
    if (base) *base = al.base;
    if (size) *size = al.size;
    return true;
}

/* p inside one of the ranges of m (base -> size) */
static bool in_ranges(const std::map<uintptr_t, size_t> &m, const void *p) {
    std::lock_guard<std::mutex> g(table_mutex);
    auto it = m.upper_bound((uintptr_t)p);
    if (it == m.begin()) return false;
    --it;
    return (uintptr_t)p < it->first + it->second;
}
static bool was_freed(const void *p) { return in_ranges(freed, p); }
static bool is_pinned(const void *p) { return in_ranges(pinned, p); }

/* ---- reports ---------------------------------------------------------------------------------------------- */

/* a cp.async of this thread not yet waited for: the 16 bytes read at issue, written to dst at its wait_group */
struct async_copy {
    void *dst;
    unsigned char bytes[16];
    int group; /* the commit group it belongs to (the count of commits before it) */
};

struct thread_state {
    emu_fiber fiber;
    uint3 idx;
    int index, lane, warp;
    int state; /* T_RUN, T_BLOCK, T_WARP, T_DONE */
    int line;
    std::vector<async_copy> copies; /* cp.async in flight, oldest first */
    int commits;                    /* cp.async.commit_group so far */
};
enum { T_RUN, T_BLOCK, T_WARP, T_DONE };

struct warp_state {
    int size, alive, arrived;
    unsigned seq;
    uint64_t slot[2][32];
    uint32_t mma_a[32][4], mma_b[32][2]; /* the lanes' fragments of the mma.sync in progress */
    const uint16_t *ldm_row[32];         /* the lanes' row addresses of the ldmatrix in progress */
};

struct block_state {
    uint3 idx;
    int n, alive, arrived, line;
    std::vector<thread_state> th;
    std::vector<warp_state> warps;
    emu_fiber sched;
    void *dyn;
    void *ctx;
    body_fn body;
    bool reverse;
};

static void where(char *buf, size_t n) {
    buf[0] = 0;
    if (!cur_launch) return;
    snprintf(buf, n, " [kernel %s, grid (%u,%u,%u) x block (%u,%u,%u)", cur_launch->kernel, cur_launch->grid.x,
             cur_launch->grid.y, cur_launch->grid.z, cur_launch->block.x, cur_launch->block.y, cur_launch->block.z);
    size_t l = strlen(buf);
    if (cur_block)
        l += snprintf(buf + l, n - l, ", in block (%u,%u,%u)", cur_block->idx.x, cur_block->idx.y, cur_block->idx.z);
    if (cur_thread && l < n) l += snprintf(buf + l, n - l, " thread (%u,%u,%u)", cur_thread->idx.x, cur_thread->idx.y, cur_thread->idx.z);
    if (l < n) snprintf(buf + l, n - l, "]");
}

void fatal(const char *fmt, ...) {
    char msg[1024], w[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    where(w, sizeof w);
    fprintf(stderr, "kiln CUDA emulator: %s%s\n", msg, w);
    void *bt[48];
    int nb = backtrace(bt, 48);
    backtrace_symbols_fd(bt, nb, 2);
    fflush(stderr);
    abort();
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr;
    const allocation *al = find_alloc_locked(a, true); /* no lock: we abort anyway */
    if (al) {
        if (a >= (uintptr_t)al->map + al->usable)
            fatal("access %zu bytes past the end of a %zu-byte device allocation (cudaMalloc #%llu at %p)",
                  (size_t)(a - (al->base + al->size)), al->size, (unsigned long long)al->id, (void *)al->base);
        if (!device_depth)
            fatal("host code touched device memory at %p (offset %zu of a %zu-byte allocation, cudaMalloc #%llu): on a "
                  "GPU this address is not host memory", (void *)a, (size_t)(a - al->base), al->size,
                  (unsigned long long)al->id);
        fatal("access to %p in the slack before a %zu-byte device allocation (cudaMalloc #%llu)", (void *)a, al->size,
              (unsigned long long)al->id);
    }
    if (cur_thread && cur_block) {
        char *lo = (char *)cur_thread->fiber.stack;
        if ((char *)a >= lo - page_bytes && (char *)a < lo + cur_thread->fiber.stack_bytes)
            fatal("stack overflow of an emulated GPU thread at %p", (void *)a);
        fatal("invalid address %p in a kernel (not device memory)", (void *)a);
    }
    signal(sig, SIG_DFL); /* not ours: the default crash */
}

static void install_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        page_bytes = (size_t)sysconf(_SC_PAGESIZE);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, nullptr);
        sigaction(SIGBUS, &sa, nullptr);
    });
    static thread_local bool alt = false;
    if (!alt) {
        stack_t ss;
        ss.ss_size = 1 << 16;
        ss.ss_sp = malloc(ss.ss_size);
        ss.ss_flags = 0;
        sigaltstack(&ss, nullptr);
        alt = true;
    }
}

/* ---- the scheduler ---------------------------------------------------------------------------------------- */

#define STACK_BYTES ((size_t)32 << 10) /* the deepest kernel (the tensor-core attention) needs a few KB */

struct stack_pool {
    std::vector<char *> stacks; /* each: one guard page, then STACK_BYTES */
    char *get(size_t i) {
        while (stacks.size() <= i) {
            char *m = (char *)mmap(nullptr, STACK_BYTES + page_bytes, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) fatal("no memory for the stacks of emulated threads");
            mprotect(m, page_bytes, PROT_NONE);
            stacks.push_back(m + page_bytes);
        }
        return stacks[i];
    }
};
static thread_local stack_pool pool;

void *dynamic_smem() { return cur_block->dyn; }

/* Runs thread i next (sets the built-ins it reads) */
static inline void enter(block_state *b, thread_state *t) {
    cur_thread = t;
    cur_tid = &t->idx;
    cur_lane = t->lane;
    (void)b;
}

/* The next runnable thread after index from, in the block's order (forward or reverse), or -1. A warp whose
 * barrier just completed is resumed from its first lane, so that a warp runs through its shuffles with its 32
 * stacks warm before the block moves on. */
static int pick_next(block_state *b, int from, int released_warp) {
    int n = b->n;
    if (released_warp >= 0) {
        int lo = released_warp * 32, cnt = b->warps[(size_t)released_warp].size;
        return b->reverse ? lo + cnt - 1 : lo;
    }
    thread_state *th = b->th.data();
    int i = from;
    for (int k = 1; k <= n; k++) { /* no modulo: a division per shuffle was a fifth of an emulated run */
        if (b->reverse) i = i == 0 ? n - 1 : i - 1;
        else i = i + 1 == n ? 0 : i + 1;
        if (th[i].state == T_RUN) return i;
    }
    return -1;
}

/* The running thread stops (waits or exits): switch straight to the next runnable thread, or to the scheduler
 * when there is none (all done, or a deadlock it reports). */
static void switch_away(int released_warp) {
    block_state *b = cur_block;
    thread_state *t = cur_thread;
    int me = t->index;
    int nx = pick_next(b, me, released_warp);
    if (nx == me) return; /* released ourselves (the last lane of our warp, resumed first): go on */
    emu_fiber *to = nx < 0 ? &b->sched : &b->th[(size_t)nx].fiber;
    if (nx >= 0) enter(b, &b->th[(size_t)nx]);
    emu_fiber_switch(&t->fiber, to);
    enter(b, t); /* resumed */
}

[[noreturn]] static void fiber_main() {
    block_state *b = cur_block;
    b->body(b->ctx);
    thread_state *t = cur_thread;
    if (!t->copies.empty())
        fatal("a thread returned with %zu cp.async copies never waited for (cp.async.wait_group)", t->copies.size());
    t->state = T_DONE;
    b->alive--;
    warp_state &w = b->warps[(size_t)t->warp];
    w.alive--;
    if (w.arrived > 0)
        fatal("a shuffle or __syncwarp with exited lanes: a lane returned while %d lane(s) of its warp wait in one "
              "(every lane named in the mask must take part)", w.arrived);
    if (b->arrived > 0 && b->arrived == b->alive) {
        for (auto &o : b->th)
            if (o.state == T_BLOCK) o.state = T_RUN;
        b->arrived = 0;
    }
    switch_away(-1);
    abort(); /* a finished thread is never resumed */
}

void syncthreads(int line) {
    block_state *b = cur_block;
    thread_state *t = cur_thread;
    if (!b) fatal("__syncthreads outside a kernel");
    if (b->arrived == 0) b->line = line;
    else if (b->line != line)
        fatal("divergent __syncthreads: thread (%u,%u,%u) waits at line %d, others at line %d", t->idx.x, t->idx.y,
              t->idx.z, line, b->line);
    t->state = T_BLOCK;
    t->line = line;
    if (++b->arrived == b->alive) {
        for (auto &o : b->th)
            if (o.state == T_BLOCK) o.state = T_RUN;
        b->arrived = 0;
    }
    switch_away(-1);
}

static void warp_arrive(unsigned mask, int line, const char *what) {
    block_state *b = cur_block;
    thread_state *t = cur_thread;
    if (!b) fatal("%s outside a kernel", what);
    warp_state &w = b->warps[(size_t)t->warp];
    if (mask != 0xffffffffu) fatal("%s with the partial mask 0x%08x (line %d): not emulated", what, mask, line);
    if (w.size != 32 || w.alive != 32)
        fatal("%s with exited lanes: mask 0xffffffff (line %d) in a warp of which only %d of 32 lanes exist or still "
              "run", what, line, w.alive);
    t->state = T_WARP;
    t->line = line;
    int released = -1;
    if (++w.arrived == w.alive) {
        thread_state *lane0 = &b->th[(size_t)t->warp * 32];
        for (int l = 0; l < 32; l++)
            if (lane0[l].state == T_WARP) lane0[l].state = T_RUN;
        w.arrived = 0;
        w.seq++;
        released = t->warp;
    }
    switch_away(released);
}

void syncwarp(unsigned mask, int line) { warp_arrive(mask, line, "__syncwarp"); }

uint64_t warp_exchange(unsigned mask, uint64_t bits, int src, int line) {
    block_state *b = cur_block;
    if (!b) fatal("shuffle outside a kernel");
    thread_state *t = cur_thread;
    warp_state &w = b->warps[(size_t)t->warp];
    unsigned parity = w.seq & 1u;
    w.slot[parity][t->lane] = bits;
    warp_arrive(mask, line, "__shfl_sync");
    return w.slot[parity][src];
}

static float bf16_bits(uint32_t reg, int half) { return __uint_as_float(((reg >> (16 * half)) & 0xffffu) << 16); }

void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], int line) {
    block_state *bs = cur_block;
    if (!bs) fatal("mma.sync outside a kernel");
    thread_state *t = cur_thread;
    warp_state &w = bs->warps[(size_t)t->warp];
    memcpy(w.mma_a[t->lane], a, sizeof w.mma_a[0]);
    memcpy(w.mma_b[t->lane], b, sizeof w.mma_b[0]);
    warp_arrive(0xffffffffu, line, "mma.sync");
    /* A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k % 2;
     * B[k][n]: lane n * 4 + (k % 8) / 2, register (k >= 8), half k % 2 */
    const int g = t->lane >> 2, tg = t->lane & 3;
    float out[4];
    for (int i = 0; i < 4; i++) {
        int r = g + (i >= 2 ? 8 : 0), n = 2 * tg + (i & 1);
        float s = d[i];
        for (int k = 0; k < 16; k++) {
            float av = bf16_bits(w.mma_a[(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)], k % 2);
            float bv = bf16_bits(w.mma_b[n * 4 + (k % 8) / 2][k >= 8], k % 2);
            s += av * bv;
        }
        out[i] = s;
    }
    warp_arrive(0xffffffffu, line, "mma.sync"); /* every lane has read the posts before any posts again */
    memcpy(d, out, sizeof out);
}

/* the static __shared__ variables of every kernel (kcu_emu.h puts them in this section) */
extern "C" char __start_kcu_emu_shared[] __attribute__((weak)), __stop_kcu_emu_shared[] __attribute__((weak));

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l names row l % 8 of matrix l / 8 (16 bytes, 16-byte
 * aligned, in the block's shared memory); register j of lane i gets matrix j's row i / 4, elements 2 (i % 4) and
 * 2 (i % 4) + 1 - or, transposed, the elements at rows 2 (i % 4) and 2 (i % 4) + 1 of column i / 4 (low half
 * first). */
void ldmatrix_x4(uint32_t r[4], const void *row, bool trans, int line) {
    block_state *bs = cur_block;
    if (!bs) fatal("ldmatrix outside a kernel");
    thread_state *t = cur_thread;
    const char *p = (const char *)row, *dyn = (const char *)bs->dyn;
    bool in_dyn = dyn && p >= dyn && p + 16 <= dyn + cur_launch->dyn_smem;
    bool in_static = __start_kcu_emu_shared && p >= __start_kcu_emu_shared && p + 16 <= __stop_kcu_emu_shared;
    if (!in_dyn && !in_static) fatal("ldmatrix (line %d): lane %d's row %p is not in the block's shared memory", line, t->lane, row);
    if ((uintptr_t)p % 16) fatal("ldmatrix (line %d): lane %d's row %p is not 16-byte aligned", line, t->lane, row);
    warp_state &w = bs->warps[(size_t)t->warp];
    w.ldm_row[t->lane] = (const uint16_t *)row;
    warp_arrive(0xffffffffu, line, "ldmatrix");
    const int i = t->lane;
    uint32_t out[4];
    for (int j = 0; j < 4; j++) {
        const uint16_t *const *m = w.ldm_row + 8 * j; /* matrix j's rows */
        uint16_t lo, hi;
        if (!trans) lo = m[i / 4][2 * (i % 4)], hi = m[i / 4][2 * (i % 4) + 1];
        else lo = m[2 * (i % 4)][i / 4], hi = m[2 * (i % 4) + 1][i / 4];
        out[j] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    warp_arrive(0xffffffffu, line, "ldmatrix"); /* every lane has read the rows before any posts again */
    memcpy(r, out, sizeof out);
}

/* cp.async.cg.shared.global, 16 bytes: the source is read now, the destination written only when a
 * cp.async.wait_group covers its group - so a kernel that reads the tile before waiting (or waits for the wrong
 * group) reads the NaN bytes shared memory starts with, and its op comparison fails. */
static bool in_shared(const char *p, size_t n) {
    const char *dyn = (const char *)cur_block->dyn;
    bool in_dyn = dyn && p >= dyn && p + n <= dyn + cur_launch->dyn_smem;
    bool in_static = __start_kcu_emu_shared && p >= __start_kcu_emu_shared && p + n <= __stop_kcu_emu_shared;
    return in_dyn || in_static;
}

void cp_async_16(void *smem, const void *gmem, int line) {
    if (!cur_block) fatal("cp.async outside a kernel");
    thread_state *t = cur_thread;
    if (!in_shared((const char *)smem, 16) || (uintptr_t)smem % 16)
        fatal("cp.async (line %d): destination %p is not 16 aligned bytes of the block's shared memory", line, smem);
    if ((uintptr_t)gmem % 16) fatal("cp.async (line %d): source %p is not 16-byte aligned", line, gmem);
    check_device_range(gmem, 16, "cp.async", line);
    async_copy c;
    c.dst = smem;
    memcpy(c.bytes, gmem, 16);
    c.group = t->commits;
    t->copies.push_back(c);
}

void cp_async_commit() { cur_thread->commits++; }

void cp_async_wait(int pending, int line) {
    thread_state *t = cur_thread;
    if (pending < 0) fatal("cp.async.wait_group (line %d): %d", line, pending);
    /* complete every group but the newest `pending` committed ones (copies not yet committed stay in flight) */
    const int done_below = t->commits - pending;
    size_t keep = 0;
    for (size_t i = 0; i < t->copies.size(); i++) {
        async_copy &c = t->copies[i];
        if (c.group < done_below) memcpy(c.dst, c.bytes, 16);
        else t->copies[keep++] = c;
    }
    t->copies.resize(keep);
}

void trap(const char *what) { fatal("%s", what); }

void check_device_range(const void *p, size_t bytes, const char *kernel, int arg) {
    if (device_range(p, bytes)) return;
    uintptr_t base;
    size_t size;
    if (device_range(p, 1, &base, &size))
        fatal("kernel %s: argument %d spans %zu bytes from %p, past the end of its %zu-byte device allocation by %zu",
              kernel, arg, bytes, p, size, (size_t)((uintptr_t)p + bytes - (base + size)));
    fatal("kernel %s: argument %d (%p) is %s, not device memory", kernel, arg, p,
          was_freed(p) ? "freed device memory (cudaFree'd: a stale pointer)" : is_pinned(p) ? "pinned host memory" : "host memory");
}

/* dynamic shared memory of the running block: its end against a guard page, filled with 0xff (NaN) bytes */
struct dyn_buffer {
    char *map = nullptr;
    size_t usable = 0;
    void *get(size_t bytes) {
        size_t need = (bytes + page_bytes - 1) / page_bytes * page_bytes;
        if (need == 0) need = page_bytes;
        if (need > usable) {
            if (map) munmap(map, usable + page_bytes);
            map = (char *)mmap(nullptr, need + page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (map == MAP_FAILED) fatal("no memory for %zu bytes of dynamic shared memory", bytes);
            mprotect(map + need, page_bytes, PROT_NONE);
            usable = need;
        }
        size_t off = usable - ((bytes + 127) / 128 * 128);
        memset(map + off, 0xff, usable - off);
        return map + off;
    }
};
static thread_local dyn_buffer dyn_mem;

static void run_block(block_state &b, const launch_state &L) {
    int n = (int)(L.block.x * L.block.y * L.block.z);
    b.n = b.alive = n;
    b.arrived = 0;
    b.th.assign((size_t)n, thread_state{});
    int nw = (n + 31) / 32;
    b.warps.assign((size_t)nw, warp_state{});
    for (int w = 0; w < nw; w++) b.warps[(size_t)w].size = b.warps[(size_t)w].alive = n - w * 32 < 32 ? n - w * 32 : 32;
    for (int i = 0; i < n; i++) {
        thread_state &t = b.th[(size_t)i];
        t.idx.x = (unsigned)i % L.block.x;
        t.idx.y = (unsigned)(i / (int)L.block.x) % L.block.y;
        t.idx.z = (unsigned)(i / (int)(L.block.x * L.block.y));
        t.index = i;
        t.lane = i & 31;
        t.warp = i >> 5;
        t.state = T_RUN;
        emu_fiber_init(&t.fiber, pool.get((size_t)i), STACK_BYTES, fiber_main);
    }
    b.dyn = dyn_mem.get(L.dyn_smem);
    if (__start_kcu_emu_shared) memset(__start_kcu_emu_shared, 0xff, (size_t)(__stop_kcu_emu_shared - __start_kcu_emu_shared));
    b.reverse = cfg().reverse;
    cur_block = &b;
    cur_bid = &b.idx;
    for (;;) {
        int first = pick_next(&b, b.reverse ? 0 : n - 1, -1); /* forward: from 0; reverse: from n - 1 */
        if (first < 0) break;
        enter(&b, &b.th[(size_t)first]);
        emu_fiber_switch(&b.sched, &b.th[(size_t)first].fiber); /* back here when nothing can run */
        cur_thread = nullptr;
        cur_tid = nullptr;
    }
    if (b.alive > 0) {
        int wb = 0, ww = 0, line_b = 0, line_w = 0;
        for (auto &t : b.th) {
            if (t.state == T_BLOCK) wb++, line_b = t.line;
            if (t.state == T_WARP) ww++, line_w = t.line;
        }
        fatal("deadlock: %d thread(s) wait in __syncthreads (line %d), %d in a warp barrier (line %d), %d exited", wb,
              line_b, ww, line_w, n - b.alive);
    }
    cur_block = nullptr;
    cur_bid = nullptr;
}

/* KCU_EMU_STATS=1: per kernel, launches, emulated threads and CPU seconds, printed at exit (where an emulated run
 * spends its time) */
struct kernel_stats {
    uint64_t launches, threads;
    double seconds;
};
static std::mutex stats_mutex;
static std::map<std::string, kernel_stats> *stats;

static void print_stats() {
    std::lock_guard<std::mutex> g(stats_mutex);
    std::vector<std::pair<double, std::string>> order;
    for (auto &kv : *stats) order.push_back({kv.second.seconds, kv.first});
    std::sort(order.rbegin(), order.rend());
    fprintf(stderr, "kiln CUDA emulator: %-28s %9s %14s %9s\n", "kernel", "launches", "threads", "seconds");
    for (auto &o : order) {
        const kernel_stats &k = (*stats)[o.second];
        fprintf(stderr, "kiln CUDA emulator: %-28s %9llu %14llu %9.2f\n", o.second.c_str(), (unsigned long long)k.launches,
                (unsigned long long)k.threads, k.seconds);
    }
}

static void count(const char *name, uint64_t threads, double seconds) {
    static bool on = env_int("KCU_EMU_STATS", 0) != 0;
    if (!on) return;
    std::lock_guard<std::mutex> g(stats_mutex);
    if (!stats) {
        stats = new std::map<std::string, kernel_stats>();
        atexit(print_stats);
    }
    kernel_stats &k = (*stats)[name];
    k.launches++;
    k.threads += threads;
    k.seconds += seconds;
}

static std::mutex attr_mutex;
static std::map<const void *, int> max_dyn_smem; /* cudaFuncSetAttribute */

void launch(const void *func, const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void *ctx,
            body_fn body, body_fn check, void (*ctx_free)(void *ctx)) {
    install_handler();
    std::shared_ptr<void> hold(ctx, ctx_free);
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    int limit = 48 * 1024;
    {
        std::lock_guard<std::mutex> g(attr_mutex);
        auto it = max_dyn_smem.find(func);
        if (it != max_dyn_smem.end()) limit = it->second;
    }
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || smem > (size_t)limit) {
        if (smem > (size_t)limit && threads && threads <= 1024)
            fprintf(stderr, "kiln CUDA emulator: kernel %s asks for %zu bytes of dynamic shared memory over its limit "
                    "%d (cudaFuncSetAttribute)\n", name, smem, limit);
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    launch_state L = {grid, block, smem, name};
    cudaError_t e = enqueue(stream, name, [L, hold, body, check]() {
        device_section ds;
        const launch_state *outer = cur_launch;
        cur_launch = &L;
        /* arguments are checked when the work runs: a graph replays the pointers it captured */
        check(hold.get());
        auto t0 = std::chrono::steady_clock::now();
        block_state b;
        b.ctx = hold.get();
        b.body = body;
        for (unsigned z = 0; z < L.grid.z; z++)
            for (unsigned y = 0; y < L.grid.y; y++)
                for (unsigned x = 0; x < L.grid.x; x++) {
                    b.idx.x = x, b.idx.y = y, b.idx.z = z;
                    run_block(b, L);
                }
        cur_launch = outer;
        count(L.kernel, (uint64_t)L.grid.x * L.grid.y * L.grid.z * L.block.x * L.block.y * L.block.z,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    });
    set_error(e);
}

/* ---- streams, events, graphs ------------------------------------------------------------------------------ */

struct recorded {
    std::string what;
    std::function<void()> op;
};

} /* namespace kcu_emu */

struct CUstream_st {
    bool capturing = false, invalid = false;
    std::string invalid_why;
    std::thread::id owner;
    std::vector<kcu_emu::recorded> ops;
};
struct CUgraph_st {
    std::vector<kcu_emu::recorded> ops;
};
struct CUgraphExec_st {
    std::vector<kcu_emu::recorded> ops;
};
struct CUevent_st {
    std::chrono::steady_clock::time_point t;
};

namespace kcu_emu {

static thread_local cudaStream_t capturing_here; /* the stream this host thread is capturing */

/* A call that is not allowed while this thread captures (cudaStreamCaptureModeThreadLocal): fails and
 * invalidates the capture, as the runtime does. */
static bool refused_in_capture(const char *call) {
    if (!capturing_here) return false;
    capturing_here->invalid = true;
    if (capturing_here->invalid_why.empty()) capturing_here->invalid_why = call;
    set_error(cudaErrorStreamCaptureUnsupported);
    return true;
}

cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> op) {
    if (stream && stream->capturing) {
        stream->ops.push_back(recorded{what, std::move(op)});
        return cudaSuccess;
    }
    if (capturing_here && !stream) { /* the legacy stream, while this thread captures another */
        refused_in_capture(what);
        return cudaErrorStreamCaptureImplicit;
    }
    op();
    return cudaSuccess;
}

} /* namespace kcu_emu */

using namespace kcu_emu;

/* ---- the runtime API -------------------------------------------------------------------------------------- */

extern "C" {

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulator: KCU_EMU_DEVICES=0)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    default: return "unknown error (emulator)";
    }
}

cudaError_t cudaGetDeviceCount(int *n) {
    *n = cfg().count;
    return *n > 0 ? cudaSuccess : set_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= cfg().count) return set_error(cudaErrorInvalidDevice);
    cur_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d) {
    if (cfg().count < 1) return set_error(cudaErrorNoDevice);
    *d = cur_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    if (d < 0 || d >= cfg().count) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "kiln CUDA emulator");
    p->major = cfg().cc / 10;
    p->minor = cfg().cc % 10;
    p->multiProcessorCount = 132;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = cfg().optin;
    p->totalGlobalMem = cfg().total;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || (size_t)value > cfg().optin) return set_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(attr_mutex);
    max_dyn_smem[func] = value;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size) {
    install_handler();
    *p = nullptr;
    if (refused_in_capture("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
    std::lock_guard<std::recursive_mutex> gpu(gpu_mutex);
    std::lock_guard<std::mutex> g(table_mutex);
    if (size > cfg().total - allocated_bytes) return set_error(cudaErrorMemoryAllocation);
    size_t body = (size + 255) / 256 * 256, usable = (body + page_bytes - 1) / page_bytes * page_bytes;
    if (usable == 0) usable = page_bytes;
    char *m = (char *)mmap(nullptr, usable + page_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
    if (!cfg().protect || device_depth) mprotect(m, usable, PROT_READ | PROT_WRITE);
    allocation a = {(uintptr_t)(m + usable - body), size, m, usable, ++alloc_serial};
    allocs[a.base] = a;
    allocated_bytes += size;
    *p = (void *)a.base;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    if (refused_in_capture("cudaFree")) return cudaErrorStreamCaptureUnsupported;
    std::lock_guard<std::recursive_mutex> gpu(gpu_mutex);
    std::lock_guard<std::mutex> g(table_mutex);
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end()) {
        fprintf(stderr, "kiln CUDA emulator: cudaFree(%p): not an allocation's start\n", p);
        return set_error(cudaErrorInvalidValue);
    }
    /* The address range is never handed out again: its pages are dropped and it stays mapped inaccessible, so a
     * stale pointer (a graph replayed after its buffer moved) faults or fails its argument check instead of
     * reading whatever a later allocation at the same address holds. */
    madvise(it->second.map, it->second.usable, MADV_DONTNEED);
    mprotect(it->second.map, it->second.usable, PROT_NONE);
    freed[it->first] = it->second.size;
    allocated_bytes -= it->second.size;
    allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
    *p = nullptr;
    if (refused_in_capture("cudaHostAlloc")) return cudaErrorStreamCaptureUnsupported;
    void *m = nullptr;
    if (posix_memalign(&m, 4096, size ? size : 1)) return set_error(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> g(table_mutex);
    pinned[(uintptr_t)m] = size ? size : 1;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> g(table_mutex);
    if (!pinned.erase((uintptr_t)p)) return set_error(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    std::lock_guard<std::mutex> g(table_mutex);
    *total_b = cfg().total;
    *free_b = cfg().total - allocated_bytes;
    return cudaSuccess;
}

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                        bool sync) {
    if (!n) return cudaSuccess;
    bool dd = device_range(dst, n), sd = device_range(src, n);
    if (kind == cudaMemcpyDefault) kind = dd && sd ? cudaMemcpyDeviceToDevice : dd ? cudaMemcpyHostToDevice : sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
    bool ok = kind == cudaMemcpyHostToDevice ? dd && !sd
            : kind == cudaMemcpyDeviceToHost ? sd && !dd
            : kind == cudaMemcpyDeviceToDevice ? dd && sd
            : !dd && !sd;
    if (!ok) {
        fprintf(stderr, "kiln CUDA emulator: cudaMemcpy%s of %zu bytes, kind %d: destination %p is %s, source %p is %s\n",
                sync ? "" : "Async", n, (int)kind, dst, dd ? "device memory" : "not device memory (or too short)",
                src, sd ? "device memory" : "not device memory (or too short)");
        return set_error(cudaErrorInvalidValue);
    }
    bool host_side = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost;
    if (capturing_here && (sync || (host_side && !is_pinned(kind == cudaMemcpyHostToDevice ? src : dst)))) {
        refused_in_capture(sync ? "cudaMemcpy" : "cudaMemcpyAsync with pageable host memory");
        return cudaErrorStreamCaptureUnsupported;
    }
    return set_error(enqueue(sync ? nullptr : stream, "memcpy", [dst, src, n]() {
        device_section ds;
        memmove(dst, src, n);
    }));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream) {
    return copy(dst, src, n, kind, stream, false);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    return copy(dst, src, n, kind, nullptr, true);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream) {
    if (!n) return cudaSuccess;
    if (!device_range(dst, n)) {
        fprintf(stderr, "kiln CUDA emulator: cudaMemsetAsync of %zu bytes at %p: not device memory\n", n, dst);
        return set_error(cudaErrorInvalidValue);
    }
    return set_error(enqueue(stream, "memset", [dst, value, n]() {
        device_section ds;
        memset(dst, value, n);
    }));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    *s = new CUstream_st();
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s && s->capturing) return set_error(cudaErrorIllegalState);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (refused_in_capture("cudaStreamSynchronize")) return cudaErrorStreamCaptureUnsupported;
    return cudaSuccess; /* work ran when it was enqueued */
}
cudaError_t cudaDeviceSynchronize(void) { return cudaStreamSynchronize(nullptr); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    *e = new CUevent_st();
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    return set_error(enqueue(s, "event record", [e]() { e->t = std::chrono::steady_clock::now(); }));
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (refused_in_capture("cudaEventSynchronize")) return cudaErrorStreamCaptureUnsupported;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    if (!s) return set_error(cudaErrorStreamCaptureUnsupported); /* the legacy stream cannot be captured */
    if (s->capturing || capturing_here) return set_error(cudaErrorIllegalState);
    if (mode != cudaStreamCaptureModeThreadLocal) {
        fprintf(stderr, "kiln CUDA emulator: only cudaStreamCaptureModeThreadLocal is emulated\n");
        return set_error(cudaErrorInvalidValue);
    }
    s->capturing = true;
    s->invalid = false;
    s->invalid_why.clear();
    s->owner = std::this_thread::get_id();
    s->ops.clear();
    capturing_here = s;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    *g = nullptr;
    if (!s || !s->capturing) return set_error(cudaErrorIllegalState);
    s->capturing = false;
    capturing_here = nullptr;
    if (s->invalid) {
        fprintf(stderr, "kiln CUDA emulator: capture invalidated by %s\n", s->invalid_why.c_str());
        s->ops.clear();
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    *g = new CUgraph_st{std::move(s->ops)};
    s->ops.clear();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags) {
    if (!g) return set_error(cudaErrorInvalidValue);
    *x = new CUgraphExec_st{g->ops};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
    if (!x) return set_error(cudaErrorInvalidValue);
    if (s && s->capturing) {
        fprintf(stderr, "kiln CUDA emulator: a graph launched into a capturing stream is not emulated\n");
        return set_error(cudaErrorInvalidValue);
    }
    for (auto &r : x->ops) r.op();
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    delete x;
    return cudaSuccess;
}

} /* extern "C" */
