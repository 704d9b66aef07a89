/* matmul.c - the matmul op: y[M,N] (op)= x[M,K] . w[N,K]^T + bias, on the pool.
 *
 * FAST with bf16 weights first converts x to bf16 once (row-major for the AVX-512/AVX2/generic kernels, the AMX
 * B-tile layout for AMX) into backend scratch, then splits the output into blocks on the pool. Rows are taken
 * in chunks so the converted activation stays under MATMUL_SCRATCH_MAX bytes; each chunk streams the weight once.
 * EXACT (or f32 weights) reads x as f32 directly. */
#include "compute/cpu/gemm.h"
#include "compute/lora.h"
#include "tensor/quant.h"

#define MATMUL_SCRATCH_MAX ((size_t)48 << 20)
#define BLOCK_M 256 /* rows of x per task (vector tiers) */
#define BLOCK_N 128 /* rows of w per task (vector tiers) */

typedef struct mm_job {
    cpu_gemm g;
    int64_t r0, r1; /* the chunk of rows in flight */
    int64_t block_m, block_n, nblk_n;
    const float *x;
    int64_t ldx;
    char *ws; /* AMX / packed kernel: per-thread workspaces, ws_bytes apart */
    size_t ws_bytes;
    int64_t pack_rows; /* rows of x each pack task converts */
} mm_job;

static void pack_task(void *ctx, size_t i, int thread) {
    mm_job *j = ctx;
    int64_t r = j->r0 + (int64_t)i * j->pack_rows, re = r + j->pack_rows < j->r1 ? r + j->pack_rows : j->r1;
    uint16_t *xb = (uint16_t *)j->g.xb;
    if (j->g.amx) { /* the pack covers the chunk (row r0 at offset 0) padded with zero rows to a multiple of 32 */
        cpu_gemm_pack_amx(xb, j->x + j->r0 * j->ldx, j->ldx, j->r1 - j->r0, j->g.K, r - j->r0, r - j->r0 + 32);
        return;
    }
    if (j->g.packed) { /* whole groups of MR rows (pack_rows is a multiple of MR); the last one zero-padded */
        const int mr = cpu_gemm_packed_mr(j->g.tier);
        const int64_t end = re == j->r1 ? (re - j->r0 + mr - 1) / mr * mr : re - j->r0;
        cpu_gemm_pack_x((float *)j->g.x, j->x + j->r0 * j->ldx, j->ldx, j->r1 - j->r0, j->g.K, r - j->r0, end,
                        j->g.fast, j->g.dot, j->g.tier);
        return;
    }
    for (int64_t row = r; row < re; row++) {
        const float *xr = j->x + row * j->ldx;
        uint16_t *o = xb + (row - j->r0) * j->g.ldxb;
        for (int64_t k = 0; k < j->g.K; k++) o[k] = f32_to_bf16(xr[k]);
    }
}

static void block_task(void *ctx, size_t i, int thread) {
    const mm_job *j = ctx;
    int64_t bn = (int64_t)i % j->nblk_n, bm = (int64_t)i / j->nblk_n;
    int64_t n0 = bn * j->block_n, n1 = n0 + j->block_n < j->g.N ? n0 + j->block_n : j->g.N;
    int64_t m0 = j->r0 + bm * j->block_m, m1 = m0 + j->block_m < j->r1 ? m0 + j->block_m : j->r1;
    cpu_gemm g = j->g; /* the chunk's rows are rows 0.. of xb and of the shifted x and y */
    if (g.amx || g.packed || g.wq != KILN_DT_F32) g.ws = j->ws + (size_t)thread * j->ws_bytes;
    if (g.fast || g.packed) { /* x is the chunk's copy: rows relative to r0 */
        g.M = j->r1 - j->r0;
        g.y += j->r0 * g.ys_m;
        cpu_gemm_block(&g, m0 - j->r0, m1 - j->r0, n0, n1);
    } else {
        cpu_gemm_block(&g, m0, m1, n0, n1);
    }
}

kiln_status cpu_matmul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                       const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err) {
    if (w && w->lora) return kiln_matmul_lora(be, y, x, w, bias, epi, err); /* the base product, then the terms */
    kiln_cpu_backend *cb = cpu_be(be);
    cpu_mat ym, xm, wm;
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "matmul", "y", &ym, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "matmul", "x", &xm, err));
    KILN_TRY(cpu_as_mat(w, -1, "matmul", "w", &wm, err));
    /* f16 weights (ComfyUI's t5xxl_fp16.safetensors) take the quantised path: widened to f32 per K slice, EXACT */
    const bool quant = wm.dt == KILN_DT_QBLOCK || wm.dt == KILN_DT_F8_E4M3 || wm.dt == KILN_DT_F8_E5M2 ||
                       wm.dt == KILN_DT_F16;
    if (wm.dt != KILN_DT_BF16 && wm.dt != KILN_DT_F32 && !quant)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "matmul: weight dtype %s (expected bf16, f32, f16, fp8 or GGML "
                         "blocks)", kiln_dtype_name(wm.dt));
    if (w->ndim != 2 || xm.cols != wm.cols || ym.rows != xm.rows || ym.cols != wm.rows)
        return KILN_FAIL(err, KILN_E_INVALID,
                         "matmul: shapes do not chain: y [%lld, %lld] = x [%lld, %lld] . w [%lld, %lld]^T",
                         (long long)ym.rows, (long long)ym.cols, (long long)xm.rows, (long long)xm.cols,
                         (long long)wm.rows, (long long)wm.cols);
    mm_job j = {.x = (const float *)xm.data, .ldx = xm.ld, .pack_rows = 32};
    cpu_gemm *g = &j.g;
    g->M = xm.rows, g->N = wm.rows, g->K = xm.cols;
    g->x = (const float *)xm.data, g->ldx = xm.ld;
    g->w = wm.data, g->ldw = wm.ld, g->w_bf16 = wm.dt == KILN_DT_BF16;
    g->wq = quant ? wm.dt : KILN_DT_F32, g->wq_type = w->qtype, g->wq_scale = w->qscale != 0.0f ? w->qscale : 1.0f;
    if (wm.dt == KILN_DT_F16) g->ldw = wm.ld * 2, g->wq_scale = 1.0f; /* (a quantised weight's ldw is in bytes) */
    if (wm.dt == KILN_DT_QBLOCK) { /* whole rows of whole blocks of a type kiln dequantises */
        const kiln_qtype_info *q = kiln_qtype_get(w->qtype);
        if (!q || !q->dequant)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "matmul: weight of GGML type %s cannot be dequantised",
                             q ? q->name : "?");
        if (wm.cols % q->block || (wm.rows > 1 && wm.ld != (int64_t)kiln_qtype_nbytes(q, (size_t)wm.cols)))
            return KILN_FAIL(err, KILN_E_INVALID, "matmul: %s weight [%lld, %lld] is not whole rows of %u-value blocks",
                             q->name, (long long)wm.rows, (long long)wm.cols, q->block);
        g->ldw = (int64_t)kiln_qtype_nbytes(q, (size_t)wm.cols);
    }
    g->y = (float *)ym.data, g->ys_m = ym.ld, g->ys_n = 1;
    g->tier = cb->tier;
    g->epi = epi ? epi->kind : KILN_EPI_NONE;
    if (g->epi != KILN_EPI_NONE && g->epi != KILN_EPI_ADD && g->epi != KILN_EPI_GATED_RESIDUAL)
        return KILN_FAIL(err, KILN_E_INVALID, "matmul: unknown epilogue %d", (int)g->epi);
    if (g->epi == KILN_EPI_GATED_RESIDUAL)
        KILN_TRY(cpu_as_vec(epi->gate, g->N, "matmul", "gate", &g->gate, err));
    if (bias) KILN_TRY(cpu_as_param(bias, g->N, "matmul", "bias", &g->bias, err));
    if (g->M == 0 || g->N == 0) return KILN_OK;

    g->fast = be->precision == KILN_PREC_FAST && g->w_bf16;
    g->amx = cpu_gemm_amx_ok(g);
    /* Every M takes the same kernel, even M = 1 (the modulation vectors), where the dot tiles would read the
     * weight in place: a row's result must not depend on how many rows share the call, or a batch of B images
     * stops equalling B single runs (with 6 image tokens per image, a batch of 2 crossed the 12-row group: tiles
     * for one image, packed for two, different summation orders). The packed kernel sums every row alike, and
     * it is the only one that can widen a quantised weight. */
    cpu_gemm_select_packed(g, cb->prefer_bf16_dot);
    int64_t chunk = g->M;
    void *scratch = NULL;
    j.block_m = BLOCK_M, j.block_n = BLOCK_N;
    if (g->packed) {
        /* x copied into scratch in the micro-kernel's layout (rounded to bf16 for FAST), chunked like the bf16
         * copy below; chunks and pack tasks are multiples of 96 rows, so of MR (6 or 12) */
        j.pack_rows = 96;
        const size_t row_bytes = (size_t)(g->K > 0 ? g->K : 1) * 4;
        chunk = (int64_t)(MATMUL_SCRATCH_MAX / row_bytes) / 96 * 96;
        if (chunk < 96) chunk = 96;
        if (chunk > g->M) chunk = g->M;
        const size_t xr_bytes = (cpu_gemm_packed_x_floats(chunk, g->K, g->tier) * 4 + 63) & ~(size_t)63;
        /* row blocks of at most GEMM_PACKED_BM, equal in size (a short last block would re-read the whole weight
         * for a few rows); starts stay multiples of 96 */
        const int64_t nblk_m = (chunk + GEMM_PACKED_BM - 1) / GEMM_PACKED_BM;
        j.block_m = ((chunk + nblk_m - 1) / nblk_m + 95) / 96 * 96, j.block_n = GEMM_PACKED_BN;
        j.ws_bytes = cpu_gemm_packed_ws_bytes();
        KILN_TRY(cpu_scratch(cb, xr_bytes + j.ws_bytes * (size_t)cb->n_threads, &scratch, err));
        g->x = scratch, g->ldx = g->K;
        j.ws = (char *)scratch + xr_bytes;
    } else if (quant) { /* generic tier: x read in place, a per-thread buffer for the widened weight slices */
        j.ws_bytes = cpu_gemm_packed_ws_bytes();
        KILN_TRY(cpu_scratch(cb, j.ws_bytes * (size_t)cb->n_threads, &scratch, err));
        j.ws = scratch;
    } else if (g->fast) {
        size_t row_bytes = (size_t)(g->K > 0 ? g->K : 1) * 2;
        chunk = (int64_t)(MATMUL_SCRATCH_MAX / row_bytes) & ~(int64_t)31;
        if (chunk < 32) chunk = 32;
        if (chunk > g->M) chunk = g->M;
        size_t xb_bytes = g->amx ? cpu_gemm_amx_packed_bytes(chunk, g->K) : (size_t)chunk * row_bytes, need = xb_bytes;
        if (g->amx) {
            /* AMX tasks: block_n columns over all rows of the chunk (the weight panels are copied once per task),
             * rows split only when there are too few column blocks to keep every thread busy */
            j.block_n = cpu_gemm_amx_block_n();
            int64_t nblk_n = (g->N + j.block_n - 1) / j.block_n, want = 2 * (int64_t)cb->n_threads;
            int64_t split = nblk_n >= want ? 1 : (want + nblk_n - 1) / nblk_n;
            j.block_m = ((chunk + split - 1) / split + 31) & ~(int64_t)31;
            xb_bytes = (xb_bytes + 63) & ~(size_t)63;
            j.ws_bytes = cpu_gemm_amx_ws_bytes(j.block_m, g->K);
            need = xb_bytes + j.ws_bytes * (size_t)cb->n_threads;
        }
        KILN_TRY(cpu_scratch(cb, need, &scratch, err));
        g->xb = scratch, g->ldxb = g->K;
        j.ws = (char *)scratch + xb_bytes;
    }
    j.nblk_n = (g->N + j.block_n - 1) / j.block_n;
    for (int64_t r0 = 0; r0 < g->M; r0 += chunk) {
        j.r0 = r0;
        j.r1 = r0 + chunk < g->M ? r0 + chunk : g->M;
        if (g->fast || g->packed) kiln_pool_run(cb->pool, (size_t)((j.r1 - r0 + j.pack_rows - 1) / j.pack_rows), pack_task,
                                                  &j);
        int64_t nblk_m = (j.r1 - r0 + j.block_m - 1) / j.block_m;
        kiln_pool_run(cb->pool, (size_t)(nblk_m * j.nblk_n), block_task, &j);
    }
    return KILN_OK;
}
