/* gemm.h - the matrix-multiply core shared by matmul and conv2d (CPU backend internals).
 *
 *   y[m, n] (op)= sum_k x[m, k] * w[n, k] (+ bias[n])      m < M, n < N, k < K
 *
 * x is an f32 activation (EXACT) or its bf16 copy (FAST, bf16 weights only); w is a weight as stored, [N, K]
 * row-major in bf16 or f32. y is addressed with two strides so the same core writes token-major matrices
 * (ys_n = 1) and NCHW images (ys_m = 1, ys_n = H*W). The core is single-threaded: callers split [0,M) x [0,N)
 * into blocks and run blocks on the pool.
 *
 * Micro-kernels per tier compute an MR x NR tile of dot products over the whole K into an f32 buffer; the shared
 * epilogue adds the bias and applies NONE / ADD / GATED_RESIDUAL while storing. The AMX kernel works on
 * 32 x 32 tiles and needs x packed by cpu_gemm_pack_amx (see below). */
#ifndef KILN_COMPUTE_CPU_GEMM_H
#define KILN_COMPUTE_CPU_GEMM_H

#include "compute/cpu/cpu_internal.h"

typedef struct cpu_gemm {
    int64_t M, N, K;
    const float *x; /* f32 [M, K], row stride ldx (EXACT) */
    int64_t ldx;
    const uint16_t *xb; /* bf16 x (FAST): row-major [M, K] stride ldxb, or AMX-packed when amx */
    int64_t ldxb;
    const void *w; /* [N, K], row stride ldw */
    int64_t ldw;
    bool w_bf16;
    /* A quantised weight (dtype QBLOCK, F8_E4M3, F8_E5M2 or F16; ldw in bytes): widened to f32 per K slice inside
     * the weight packing (gemm_quant.c), never as a whole copy. Runs EXACT (like f32 weights): packed kernel on
     * the vector tiers (for any M), a slice loop on the generic tier. */
    kiln_dtype wq; /* KILN_DT_F32 = not quantised */
    uint32_t wq_type;  /* QBLOCK: GGML type id */
    float wq_scale;    /* fp8: the per-tensor scale (1 if none) */
    bool fast; /* FAST: bf16 x . bf16 w with f32 accumulation (uses xb) */
    bool amx;  /* xb is AMX-packed and the AMX kernel runs (fast, w bf16, K % 32 == 0, N % 32 == 0) */
    bool packed; /* the packed-panel kernel runs (vector tiers; reads x as f32: FAST callers pass x rounded) */
    bool dot;    /* with packed: its bf16 variant (x as bf16 pairs, vdpbf16ps micro-kernel; AVX-512 BF16, FAST) */
    cpu_param bias; /* bias.p NULL = none */
    float *y;
    int64_t ys_m, ys_n;
    kiln_epilogue_kind epi;
    const float *gate;
    kiln_cpu_tier tier;
    void *ws; /* this thread's workspace, 64-aligned: cpu_gemm_amx_ws_bytes(rows of the block, K) bytes for AMX,
               * cpu_gemm_packed_ws_bytes() for the packed kernel */
} cpu_gemm;

/* Runs rows [m0, m1) x columns [n0, n1) of the product. For AMX, m0 must be a multiple of 32 and n0, n1 of 32,
 * and g->ws must hold cpu_gemm_amx_ws_bytes(m1 - m0, K) bytes. */
void cpu_gemm_block(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

/* Stores acc (mr x nr; element (i, j) at acc[i*as_m + j*as_n]) into y rows m0.., cols n0.. with the epilogue. */
void cpu_gemm_store(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, const float *acc, int64_t as_m,
                    int64_t as_n);

/* Whether the AMX path can run this product (tier, FAST, bf16 weights, K % 32 == 0, N % 32 == 0). */
bool cpu_gemm_amx_ok(const cpu_gemm *g);
/* Bytes of the AMX-packed copy of `rows` rows of x (rows rounded up to 32). */
size_t cpu_gemm_amx_packed_bytes(int64_t rows, int64_t K);
/* Packs f32 rows [r0, r1) of x (r0 % 16 == 0) into dst, the pack of the whole x: groups of 16 rows, each
 * [K/2][16][2] bf16 (the VNNI layout of an AMX B tile); rows past M are zero. */
void cpu_gemm_pack_amx(uint16_t *dst, const float *x, int64_t ldx, int64_t M, int64_t K, int64_t r0, int64_t r1);

/* The portable kernel of CPUs below AVX2 (the vector tiers take the packed kernel or AMX): an mr x nr tile
 * (mr <= MR, nr <= NR) into acc[i*NR + j]. */
#define GEMM_MR 4
#define GEMM_NR 4
void cpu_gemm_tile_generic(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, float *acc);
/* AMX: rows [m0, m1) x cols [n0, n1), all multiples of 32 except m1 (clipped at M when storing). The kernel
 * works on cpu_gemm_amx_block_n() columns at a time; callers split N in multiples of that. */
void cpu_gemm_block_amx(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
int64_t cpu_gemm_amx_block_n(void);
/* Bytes of the per-thread AMX workspace for a block of `rows` rows: the weight panels of one K slice and, when K
 * takes several slices, the partial sums. */
size_t cpu_gemm_amx_ws_bytes(int64_t rows, int64_t K);

/* The packed-panel kernel of the vector tiers (gemm_packed.c), for matmul: per K slice of GEMM_PACKED_KC, a
 * task widens its weight columns once into an f32 panel [column group][k][NR] (in L2), then an MR x NR
 * micro-kernel (gemm_avx2.c, gemm_avx512.c) broadcasts x values and multiplies them by NR panel values per FMA,
 * the accumulators staying in registers over the slice - no horizontal sums, each weight vector loaded once per
 * MR rows. x is read as f32 from g->x in the layout cpu_gemm_pack_x writes: groups of MR rows, each [K][MR]
 * (FAST rounds x to bf16 there, so the products are the ones a bf16 dot product forms). Blocks are at most
 * GEMM_PACKED_BM rows (m0 a multiple of 96) x GEMM_PACKED_BN columns. */
#define GEMM_PACKED_BM 480
#define GEMM_PACKED_BN 128
#define GEMM_PACKED_KC 256
/* Chooses the packed kernel for this product (sets g->packed, and g->dot for its bf16 variant): the f32 FMA
 * kernel on a vector tier without AMX, except that the FAST bf16 product on a CPU whose bf16 dot product
 * outruns its f32 FMA (prefer_dot: AMD Zen 4 and later) takes the bf16 variant. In the variant, per K slice of
 * GEMM_PACKED_KC_DOT the panel holds bf16 weight pairs [column group][k/2][NR][2], x is packed as bf16 pairs
 * [K/2][MR][2] (cpu_gemm_pack_x with dot), and each vdpbf16ps of the 12 x 32 micro-kernel adds two k steps.
 * Same panel bytes as the f32 panel: twice the k per slice. */
void cpu_gemm_select_packed(cpu_gemm *g, bool prefer_dot);
#define GEMM_PACKED_KC_DOT 512
/* Rows per x group (MR) for this tier, and the floats of the packed copy of `rows` rows. */
int cpu_gemm_packed_mr(kiln_cpu_tier tier);
size_t cpu_gemm_packed_x_floats(int64_t rows, int64_t K, kiln_cpu_tier tier);
/* Packs rows [r0, r1) of x (f32 [M, K], row stride ldx; r0 a multiple of MR) into dst, the packed copy of all
 * M rows; rounds to bf16 when fast; rows past M are zero. With dot: bf16 pairs [ceil(K/2)][MR] (32 bits each,
 * k even in the low half; an odd K's last pair has a zero high half) in the same buffer. */
void cpu_gemm_pack_x(float *dst, const float *x, int64_t ldx, int64_t M, int64_t K, int64_t r0, int64_t r1,
                     bool fast, bool dot, kiln_cpu_tier tier);
size_t cpu_gemm_packed_ws_bytes(void);
/* Quantised weights (gemm_quant.c). Rows [n0, n1) x k [kc, ke) of the weight, widened to f32, into dst (row n at
 * dst + (n - n0) * ld). kc a multiple of the GGML block, ke too unless it is K. */
void cpu_gemm_wq_rows(const cpu_gemm *g, float *dst, int64_t ld, int64_t n0, int64_t n1, int64_t kc, int64_t ke);
/* The packed kernel's panel ([group of NR][k][NR], columns n1..ncols zero) from a quantised weight; tmp holds
 * GEMM_PACKED_BN x GEMM_PACKED_KC floats. */
void cpu_gemm_pack_panel_quant(const cpu_gemm *g, float *panel, float *tmp, int64_t n0, int64_t n1, int64_t ncols,
                               int64_t kc, int64_t ke, int nr);
/* The generic tier's block loop for a quantised weight (g->ws: cpu_gemm_packed_ws_bytes()). */
void cpu_gemm_block_quant_generic(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
void cpu_gemm_block_packed(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
/* acc[i * ld + j] (=, or += unless first) sum over k < kc of xp[k * MR + i] * panel[k * NR + j], i < MR,
 * j < NR. */
typedef void (*cpu_gemm_micro_fn)(const float *xp, const float *panel, int64_t kc, float *acc, int64_t ld, bool first);
#define GEMM_AVX2_MR 6
#define GEMM_AVX2_NR 16
#define GEMM_AVX512_MR 12
#define GEMM_AVX512_NR 32
/* Widen weight rows [n0, n1) x k [kc, ke) into the panel ([group of NR][k][NR]; columns n1..ncols are zero). */
void cpu_gemm_pack_panel_avx2(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols, int64_t kc,
                              int64_t ke);
void cpu_gemm_pack_panel_avx512(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols, int64_t kc,
                                int64_t ke);
void cpu_gemm_micro_avx2(const float *xp, const float *panel, int64_t kc, float *acc, int64_t ld, bool first);
void cpu_gemm_micro_avx512(const float *xp, const float *panel, int64_t kc, float *acc, int64_t ld, bool first);
/* The bf16 variant (g->dot): xp and panel hold bf16 pairs as 32-bit words, kp pairs of k. */
void cpu_gemm_micro_dot_avx512(const float *xp, const float *panel, int64_t kp, float *acc, int64_t ld, bool first);
/* Weight rows [n0, n1) x k [kc, ke) as bf16 pairs into the panel ([group of NR][k/2][NR] 32-bit words; columns
 * n1..ncols and k >= ke are zero). */
void cpu_gemm_pack_panel_dot_avx512(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols,
                                    int64_t kc, int64_t ke);

#endif
