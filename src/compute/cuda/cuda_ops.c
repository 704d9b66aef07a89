/* cuda_ops.c - the CUDA ops: argument checks (the same errors as the CPU backend), scratch carving, algorithm
 * cache lookups, then the launchers in the .cu files. Compiled only with KILN_HAVE_CUDA. */
#include "compute/cuda/cuda_ops.h"

#ifdef KILN_HAVE_CUDA

#include <string.h>

#include "base/log.h"
#include "compute/cuda/cuda_cudnn.h"
#include "compute/cuda/cuda_internal.h"

#define SCRATCH_ALIGN 256u

static size_t align_up(size_t n) { return (n + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN; }

/* Where a tensor argument's bytes live on this GPU (the residency contract, compute/ops.h): a CUDA tensor as it
 * is; a tensor tagged CPU whose bytes this backend allocated (a view a model made with kiln_tensor_make over
 * ops->alloc memory), retagged; one inside a weight placement (cuda_residency.h), the device copy at the same
 * offset. Anything else - host memory nobody placed - is returned unchanged and fails the op's check with "lives
 * in host memory". Nothing is uploaded here: weights are placed once, at load. */
static const kiln_tensor *resident(kiln_cuda_backend *cb, const kiln_tensor *t, kiln_tensor *buf) {
    if (!t || t->backend == KILN_BACKEND_CUDA || !t->data) return t;
    void *data = t->data;
    if (!kcu_owns(cb, data)) {
        int64_t lo, hi;
        kiln_tensor_span(t, &lo, &hi);
        if (hi <= lo) return t;
        char *dev = kcu_placements_translate(&cb->placed, (const char *)t->data + lo, (size_t)(hi - lo));
        if (!dev) return t;
        data = dev - lo;
    }
    *buf = *t;
    buf->data = data;
    buf->backend = KILN_BACKEND_CUDA;
    buf->device = cb->base.device;
    return buf;
}

/* Rebinds tensor argument T to its resident version (declares T##_buf_). */
#define RESIDE(T)                                                                                             \
    kiln_tensor T##_buf_;                                                                                     \
    T = (void *)resident(cuda_be(be), (T), &T##_buf_)

/* The checks of every op on two activations of one shape: resides both, views them as matrices (a first, then
 * b, named an and bn in the errors) and compares their shapes. Residing an activation has no effects (it only
 * retags), so an op may reside its weights before calling this and keep the order of its errors. */
static kiln_status same_shape_pair(kiln_backend *be, const kiln_tensor *at, const kiln_tensor *bt, const char *op,
                                   const char *an, const char *bn, kcu_mat *a, kcu_mat *b, kiln_err *err) {
    RESIDE(at);
    RESIDE(bt);
    KILN_TRY(kcu_as_mat(at, -1, op, an, a, err));
    KILN_TRY(kcu_as_mat(bt, -1, op, bn, b, err));
    return kcu_same_shape(a, b, op, an, bn, err);
}

/* An NCHW image argument: its resident data and element type (f32 or bf16). */
typedef struct img_arg {
    void *data;
    kiln_dtype dt;
} img_arg;

/* The image ops' y and x, as same_shape_pair for NCHW images: x is checked first, then y. */
static kiln_status nchw_pair(kiln_backend *be, const kiln_tensor *yt, const kiln_tensor *xt, const char *op,
                             int64_t yd[4], int64_t xd[4], img_arg *y, img_arg *x, kiln_err *err) {
    RESIDE(yt);
    RESIDE(xt);
    KILN_TRY(kcu_as_nchw(xt, op, "x", xd, &x->dt, err));
    KILN_TRY(kcu_as_nchw(yt, op, "y", yd, &y->dt, err));
    y->data = yt->data;
    x->data = xt->data;
    return KILN_OK;
}

/* ---- GEMM with a pinned algorithm per shape ---- */

/* key's alignment: the operands' and y's pointers (NULL: a staged operand in scratch, 256-byte aligned) and the
 * bias cuBLASLt's epilogue reads (its alignment is part of what the heuristic chose for). */
static int32_t gemm_align(const void *x, const void *w, const void *y, const kcu_gemm_extra *ex) {
    int32_t a = kcu_ptr_align(x, w, y), b = ex && ex->bias ? kcu_ptr_align(ex->bias, NULL, NULL) : a;
    return a < b ? a : b;
}

/* The pinned algorithm for key (picked once per key, then cached). A fused epilogue cuBLASLt does not take is
 * cached as refused and comes back as NULL with KILN_OK: the caller then runs the plain GEMM and the epilogue
 * kernel. */
static kiln_status gemm_algo(kiln_cuda_backend *cb, const kcu_gemm_key *key, const kcu_gemm_extra *ex, kcu_algo **out,
                             kiln_err *err) {
    kcu_algo *a = kcu_algo_cache_find(&cb->algos, key);
    if (!a) {
        kcu_algo fresh;
        kiln_err pick_err = {0};
        kiln_status s = kcu_gemm_pick(cb, key, ex, &fresh, &pick_err);
        if (s == KILN_E_UNSUPPORTED && key->epilogue != KCU_GEMM_PLAIN) {
            log_info("cuda: cuBLASLt takes no fused epilogue %d here (%s): the epilogue kernel runs instead",
                     key->epilogue, pick_err.msg);
            memset(&fresh, 0, sizeof fresh);
            fresh.refused = 1;
        } else if (s != KILN_OK) {
            if (err) *err = pick_err;
            return s;
        }
        KILN_TRY(kcu_algo_cache_put(&cb->algos, key, &fresh, err));
        a = kcu_algo_cache_find(&cb->algos, key);
    }
    *out = a && !a->refused ? a : NULL;
    return KILN_OK;
}

static kiln_status gemm(kiln_cuda_backend *cb, kcu_gemm_key *key, void *y, const void *x, const void *w,
                        const kcu_gemm_extra *ex, kiln_err *err) {
    key->align = gemm_align(x, w, y, ex);
    kcu_algo *a;
    KILN_TRY(gemm_algo(cb, key, ex, &a, err));
    if (!a) return KILN_FAIL(err, KILN_E_INTERNAL, "cuBLASLt refused a %lld x %lld x %lld GEMM it took before",
                             (long long)key->m, (long long)key->n, (long long)key->k);
    if (key->epilogue != KCU_GEMM_PLAIN) cb->gemm_fused++;
    return kcu_gemm_run(cb, key, a, y, x, w, ex, err);
}

kiln_status cuda_matmul(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, const kiln_tensor *wt,
                        const kiln_tensor *bt, const kiln_epilogue *epi, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(yt);
    RESIDE(xt);
    RESIDE(wt);
    RESIDE(bt);
    kiln_epilogue epi_local;
    kiln_tensor gate_buf;
    if (epi && epi->gate) { /* the gate is an activation too */
        epi_local = *epi;
        epi_local.gate = resident(cuda_be(be), epi->gate, &gate_buf);
        epi = &epi_local;
    }
    kiln_cuda_backend *cb = cuda_be(be);
    kcu_mat y, x, w, bias, gate = {0};
    KILN_TRY(kcu_as_mat(yt, -1, "matmul", "y", &y, err));
    if (y.dt == KILN_DT_F16) /* the GEMMs write f32 or bf16, the epilogue kernel any; no model asks for f16 */
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "matmul: y in f16 (f32 or bf16 activations on CUDA)");
    KILN_TRY(kcu_as_mat(xt, -1, "matmul", "x", &x, err));
    /* a weight stored quantised (GGUF blocks, fp8 with its scale) or as f16 stays so in device memory; it is
     * widened into scratch for each product (cuda_dequant.cu), as the CPU widens it per K slice */
    const bool wq = kcu_is_stored_quantised(wt);
    kcu_qmat q = {0};
    if (wq) {
        KILN_TRY(kcu_as_qmat(wt, "matmul", "w", &q, err));
        w = (kcu_mat){(void *)q.data, q.rows, q.cols, q.cols, q.dt};
    } else {
        KILN_TRY(kcu_as_mat(wt, -1, "matmul", "w", &w, err));
    }
    if (wt && wt->lora)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "matmul: LoRA adapters applied at run time are not implemented on "
                         "the CUDA backend yet (merge them at load: --lora-merge)");
    if (x.cols != w.cols || y.rows != x.rows || y.cols != w.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "matmul: y [%lld, %lld] = x [%lld, %lld] . w [%lld, %lld]^T does not fit",
                         (long long)y.rows, (long long)y.cols, (long long)x.rows, (long long)x.cols, (long long)w.rows,
                         (long long)w.cols);
    KILN_TRY(kcu_as_vec(bt, w.rows, true, "matmul", "bias", &bias, err));
    int kind = epi ? (int)epi->kind : KILN_EPI_NONE;
    if (kind < KILN_EPI_NONE || kind > KILN_EPI_ADD) return KILN_FAIL(err, KILN_E_INVALID, "matmul: epilogue %d", kind);
    if (kind == KILN_EPI_GATED_RESIDUAL) KILN_TRY(kcu_as_vec(epi->gate, w.rows, false, "matmul", "gate", &gate, err));
    const int64_t m = x.rows, n = w.rows, k = x.cols;
    if (m == 0 || n == 0) return KILN_OK;
    if (k == 0 && !bias.data) { /* an empty sum: P = 0 */
        if (kind != KILN_EPI_NONE) return KILN_OK; /* y += 0 */
        const size_t ye = kiln_dtype_size(y.dt); /* 0.0 is all-zero bytes in f32 and bf16 */
        for (int64_t r = 0; r < m; r++) /* rows may be strided: clear row by row (a rare path) */
            KILN_TRY(kcu_memset(cb, (char *)y.data + (size_t)r * y.ld * ye, 0, (size_t)n * ye, err));
        return KILN_OK;
    }

    /* Operand precision: FAST = bf16 x bf16 (f32 accumulate; a quantised weight's values rounded to bf16, as
     * ComfyUI casts them to its bf16 compute dtype); EXACT or f32 weights = f32 x f32 (a quantised weight's
     * values exactly, as on the CPU). */
    const bool bf16 = (w.dt == KILN_DT_BF16 || wq) && be->precision == KILN_PREC_FAST;
    /* KILN_CUDA_FP8 on sm_89+ (FAST): an e4m3 weight as stored times the activation quantised to e4m3 per tensor,
     * where cuBLASLt's fp8 GEMMs take the shape (rows of whole 16-byte units); elsewhere the weight is widened */
    const bool fp8 = wq && q.dt == KILN_DT_F8_E4M3 && cb->fp8_gemm && be->precision == KILN_PREC_FAST &&
                     cb->cc_major * 10 + cb->cc_minor >= 89 && k > 0 && k % 16 == 0 && q.row_bytes % 16 == 0 &&
                     (uintptr_t)q.data % 16 == 0;
    const kiln_dtype in = fp8 ? KILN_DT_F8_E4M3 : bf16 ? KILN_DT_BF16 : KILN_DT_F32;
    const size_t es = fp8 ? 1 : bf16 ? 2 : 4;
    const int64_t ldk = fp8 ? k : (k + 7) / 8 * 8; /* staged operands: 16-byte aligned rows for the tensor cores */
    const bool stage_x = x.dt != in, stage_w = w.dt != in && !fp8;
    if (fp8) w = (kcu_mat){(void *)q.data, n, k, q.row_bytes, KILN_DT_F8_E4M3};
    /* The GEMM writes y itself (beta = 1 for ADD) - cuBLASLt's f32 GEMMs write only f32, its bf16 and e4m3 ones
     * f32 or bf16 (the f32 result rounded once) - and adds a bias or the gate in its own epilogue where cuBLASLt
     * takes it: a bias in y's dtype (cublasLt.h), a contiguous f32 gate as the alpha vector. Elsewhere the product
     * goes to f32 scratch and the epilogue kernel finishes. */
    const bool can_direct = k > 0 && (y.dt == KILN_DT_F32 || in != KILN_DT_F32);
    kcu_gemm_epilogue fuse = KCU_GEMM_PLAIN;
    if (can_direct && !fp8 && cb->fuse_epilogues) { /* KILN_CUDA_FUSE=0: never */
        if (bias.data && kind != KILN_EPI_GATED_RESIDUAL && bias.dt == y.dt) fuse = KCU_GEMM_BIAS;
        else if (!bias.data && kind == KILN_EPI_GATED_RESIDUAL && gate.dt == KILN_DT_F32) fuse = KCU_GEMM_GATE;
    }
    const kcu_gemm_extra ex = {NULL, fuse == KCU_GEMM_BIAS ? bias.data : NULL,
                               fuse == KCU_GEMM_GATE ? (const float *)gate.data : NULL};
    kcu_gemm_key key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k;
    key.ldx = stage_x ? ldk : x.ld, key.ldw = stage_w ? ldk : w.ld, key.ldy = y.ld;
    key.in_dtype = in, key.out_dtype = y.dt;
    key.accumulate = kind != KILN_EPI_NONE;
    key.epilogue = fuse;
    if (fuse != KCU_GEMM_PLAIN) { /* does cuBLASLt take it? (asked once per shape) */
        kcu_algo *a;
        key.align = gemm_align(stage_x ? NULL : x.data, stage_w ? NULL : w.data, y.data, &ex);
        KILN_TRY(gemm_algo(cb, &key, &ex, &a, err));
        if (!a) fuse = KCU_GEMM_PLAIN;
    }
    const bool direct_out = can_direct && (fuse != KCU_GEMM_PLAIN || (!bias.data && kind != KILN_EPI_GATED_RESIDUAL));
    size_t off_x = 0, off_w = 0, off_p = 0, total = 0;
    if (stage_x) {
        off_x = total;
        total += align_up((size_t)m * ldk * es);
    }
    if (stage_w) {
        off_w = total;
        total += align_up((size_t)n * ldk * es);
    }
    if (!direct_out) {
        off_p = total;
        total += align_up((size_t)m * n * 4);
    }
    size_t off_s = total; /* fp8: the scales and the GEMM's alpha and beta, then the partial maxima of |x| */
    const size_t scales_bytes = align_up(KCU_FP8_SCALES * sizeof(float));
    if (fp8) total += scales_bytes + align_up(KCU_FP8_TMP_BYTES);
    if (total) KILN_TRY(kcu_scratch_reserve(cb, total, err));
    char *scr = cb->scratch;
    kcu_mat xs = x, ws = w;
    float *scales = fp8 ? (float *)(scr + off_s) : NULL;
    if (stage_x) {
        xs = (kcu_mat){scr + off_x, m, k, ldk, in};
        if (fp8) /* also writes the GEMM's device alpha (q.scale * s) and beta (1: y += P, the key's accumulate) */
            KILN_TRY(kcu_quantize_fp8(cb, &xs, &x, q.scale, direct_out && kind != KILN_EPI_NONE ? 1.f : 0.f, scales,
                                      (float *)(scr + off_s + scales_bytes), err));
        else
            KILN_TRY(kcu_convert(cb, &xs, &x, err));
    }
    if (stage_w) {
        ws = (kcu_mat){scr + off_w, n, k, ldk, in};
        KILN_TRY(wq ? kcu_dequant(cb, &ws, &q, err) : kcu_convert(cb, &ws, &w, err));
    }
    kcu_mat p = direct_out ? y : (kcu_mat){scr + off_p, m, n, n, KILN_DT_F32};
    if (k > 0) {
        key.ldx = xs.ld, key.ldw = ws.ld, key.ldy = p.ld;
        key.out_dtype = p.dt;
        key.accumulate = direct_out && kind != KILN_EPI_NONE;
        key.epilogue = direct_out ? fuse : KCU_GEMM_PLAIN;
        const kcu_gemm_extra exs = {scales, key.epilogue == KCU_GEMM_BIAS ? ex.bias : NULL,
                                    key.epilogue == KCU_GEMM_GATE ? ex.gate : NULL};
        KILN_TRY(gemm(cb, &key, p.data, xs.data, ws.data, &exs, err));
    } else {
        KILN_TRY(kcu_memset(cb, p.data, 0, (size_t)m * n * 4, err));
    }
    if (direct_out) return KILN_OK;
    return kcu_epilogue(cb, &y, &p, bias.data ? &bias : NULL, gate.data ? &gate : NULL, kind, err);
}

/* ---- attention ---- */

#ifdef KILN_HAVE_CUDNN
/* After an attempt through cuDNN (cuda_cudnn.h): true when the op is over - it ran (counted in *ran) or failed
 * (why becomes the op's error) - and the caller returns cs; false when cuDNN did not take the call (counted in
 * *passed): kiln's own kernel runs it. */
static bool cudnn_done(kiln_status cs, const kiln_err *why, uint64_t *ran, uint64_t *passed, kiln_err *err) {
    if (cs == KILN_E_UNSUPPORTED) {
        ++*passed;
        return false;
    }
    if (cs == KILN_OK) ++*ran;
    else if (err) *err = *why;
    return true;
}
#endif

/* One wide head (the VAE's single 512-dim one) as GEMMs (KILN_CUDA_WIDE_ATTENTION=gemm): V^T once, then per chunk
 * of query rows S = Q K^T in f32 (cuBLASLt), P = softmax(S scale) rounded to bf16, O = P V - the attention's
 * FLOPs at the GEMMs' rate, where the wide tensor-core kernel re-reads K and V for every 16 queries. Chunks of
 * 256 rows (fewer where the keys are many: S and P within 256 MiB of scratch) keep 24 MiB of S and P at 16384 keys
 * (the 1024x1024 decode), and each GEMM still 4 GFLOP. bf16 q, k, v; no mask, bias or
 * causal (the caller checks). */
static kiln_status attention_wide_gemm(kiln_cuda_backend *cb, const kcu_mat *o, const kcu_mat *q, const kcu_mat *k,
                                       const kcu_mat *v, float scale, kiln_err *err) {
    const int64_t sq = q->rows, sk = k->rows, dh = q->cols;
    int64_t rows = (int64_t)((256u << 20) / ((size_t)sk * 6));
    rows = rows > 256 ? 256 : rows < 16 ? 16 : rows / 16 * 16;
    if (rows > sq) rows = sq;
    const size_t off_s = align_up((size_t)dh * sk * 2), off_p = off_s + align_up((size_t)rows * sk * 4);
    KILN_TRY(kcu_scratch_reserve(cb, off_p + align_up((size_t)rows * sk * 2), err));
    char *scr = cb->scratch;
    kcu_mat vt = {scr, dh, sk, sk, KILN_DT_BF16}; /* V^T [dh, sk] */
    KILN_TRY(kcu_transpose16(cb, &vt, v, err));
    for (int64_t r0 = 0; r0 < sq; r0 += rows) {
        const int64_t n = sq - r0 < rows ? sq - r0 : rows;
        kcu_gemm_key key;
        memset(&key, 0, sizeof key);
        key.m = n, key.n = sk, key.k = dh, key.ldx = q->ld, key.ldw = k->ld, key.ldy = sk;
        key.in_dtype = KILN_DT_BF16, key.out_dtype = KILN_DT_F32;
        const char *q0 = (const char *)q->data + (size_t)(r0 * q->ld) * 2;
        KILN_TRY(gemm(cb, &key, scr + off_s, q0, k->data, NULL, err));
        kcu_mat sm = {scr + off_s, n, sk, sk, KILN_DT_F32}, pm = {scr + off_p, n, sk, sk, KILN_DT_BF16};
        KILN_TRY(kcu_softmax_scaled(cb, &pm, &sm, scale, err));
        memset(&key, 0, sizeof key);
        key.m = n, key.n = dh, key.k = sk, key.ldx = sk, key.ldw = sk, key.ldy = o->ld;
        key.in_dtype = KILN_DT_BF16, key.out_dtype = o->dt;
        KILN_TRY(gemm(cb, &key, (char *)o->data + (size_t)(r0 * o->ld) * kiln_dtype_size(o->dt), pm.data, scr, NULL,
                      err));
    }
    return KILN_OK;
}

kiln_status cuda_attention(kiln_backend *be, kiln_tensor *ot, const kiln_tensor *qt, const kiln_tensor *kt,
                           const kiln_tensor *vt, int n_q_heads, int n_kv_heads, float scale, bool causal,
                           const kiln_tensor *mt, const kiln_tensor *bt, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(ot);
    RESIDE(qt);
    RESIDE(kt);
    RESIDE(vt);
    RESIDE(mt);
    RESIDE(bt);
    kcu_mat o, q, k, v, mask = {0}, bias = {0};
    KILN_TRY(kcu_as_mat(ot, -1, "attention", "out", &o, err));
    KILN_TRY(kcu_as_mat(qt, -1, "attention", "q", &q, err));
    KILN_TRY(kcu_as_mat(kt, -1, "attention", "k", &k, err));
    KILN_TRY(kcu_as_mat(vt, -1, "attention", "v", &v, err));
    if (n_q_heads <= 0 || n_kv_heads <= 0 || n_q_heads % n_kv_heads)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: %d query heads are not a multiple of %d kv heads", n_q_heads,
                         n_kv_heads);
    if (q.cols % n_q_heads)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: q width %lld is not %d heads", (long long)q.cols, n_q_heads);
    int64_t dh = q.cols / n_q_heads;
    if (k.cols != n_kv_heads * dh || v.cols != k.cols || v.rows != k.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: k [%lld, %lld] / v [%lld, %lld] do not match %d kv heads of %lld",
                         (long long)k.rows, (long long)k.cols, (long long)v.rows, (long long)v.cols, n_kv_heads,
                         (long long)dh);
    KILN_TRY(kcu_same_shape(&o, &q, "attention", "out", "q", err));
    if (mt) {
        KILN_TRY(kcu_as_mat(mt, mt->dtype == KILN_DT_BOOL ? KILN_DT_BOOL : KILN_DT_U8, "attention", "key_mask", &mask,
                            err));
        if (mask.rows * mask.cols != k.rows || (mask.rows > 1 && mask.ld != mask.cols))
            return KILN_FAIL(err, KILN_E_INVALID, "attention: key_mask must be a contiguous [%lld]", (long long)k.rows);
    }
    if (bt) { /* f32 whatever the activations' dtype (compute/ops.h) */
        KILN_TRY(kcu_as_mat(bt, KILN_DT_F32, "attention", "bias", &bias, err));
        if (bias.rows != (int64_t)n_q_heads * q.rows || bias.cols != k.rows || (bias.rows > 1 && bias.ld != bias.cols))
            return KILN_FAIL(err, KILN_E_INVALID,
                             "attention: bias must be a contiguous f32 [%lld, %lld] (%d heads x %lld queries, %lld "
                             "keys), got [%lld, %lld] with row stride %lld",
                             (long long)n_q_heads * q.rows, (long long)k.rows, n_q_heads, (long long)q.rows,
                             (long long)k.rows, (long long)bias.rows, (long long)bias.cols, (long long)bias.ld);
    }
    kiln_cuda_backend *cb = cuda_be(be);
    /* the tensor-core variant (bf16 operands): by default in FAST, or wherever KILN_CUDA_ATTENTION=tc; head dims
     * up to 512 on sm_80+ (cuda_launch.h), else the simple f32 kernel - which EXACT keeps by default */
#ifdef KILN_HAVE_CUDNN
    if (cb->attention == 3) { /* cuDNN where it takes the call, else variant 2 below (counted for the close line) */
        kiln_err why = {0};
        kiln_status cs = mt || bt ? KILN_E_UNSUPPORTED
                                  : kcu_cudnn_attention(cb, &o, &q, &k, &v, n_q_heads, n_kv_heads, scale, causal, &why);
        if (cudnn_done(cs, &why, &cb->cudnn_calls, &cb->cudnn_fallbacks, err)) return cs;
    }
#endif
    /* one head wider than 128 dims as GEMMs where asked for (KILN_CUDA_WIDE_ATTENTION=gemm; an A/B for the GPU run) */
    if (cb->wide_gemm && be->precision == KILN_PREC_FAST && n_q_heads == 1 && n_kv_heads == 1 && dh > 128 && !mt &&
        !bt && !causal && q.dt == KILN_DT_BF16 && k.dt == KILN_DT_BF16 && v.dt == KILN_DT_BF16 &&
        (o.dt == KILN_DT_BF16 || o.dt == KILN_DT_F32))
        return attention_wide_gemm(cb, &o, &q, &k, &v, scale, err);
    const bool tc = cb->attention >= 2 || (cb->attention == 0 && be->precision == KILN_PREC_FAST);
    if (tc && kcu_attention_tc_supported(cb, (int)dh))
        return kcu_attention_tc(cb, &o, &q, &k, &v, n_q_heads, n_kv_heads, scale, causal, mt ? &mask : NULL,
                                bt ? &bias : NULL, err);
    return kcu_attention(cb, &o, &q, &k, &v, n_q_heads, n_kv_heads, scale, causal, mt ? &mask : NULL,
                         bt ? &bias : NULL, err);
}

/* ---- norms and RoPE ---- */

kiln_status cuda_rms_norm(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, const kiln_tensor *gt, float eps,
                          kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(gt);
    kcu_mat y, x, g;
    KILN_TRY(same_shape_pair(be, yt, xt, "rms_norm", "y", "x", &y, &x, err));
    if (!gt || gt->ndim < 1) return KILN_FAIL(err, KILN_E_INVALID, "rms_norm: gain is missing");
    int64_t glen = gt->shape[0];
    KILN_TRY(kcu_as_vec(gt, glen, false, "rms_norm", "gain", &g, err));
    if (glen <= 0 || x.cols % glen)
        return KILN_FAIL(err, KILN_E_INVALID, "rms_norm: row width %lld is not a multiple of the gain length %lld",
                         (long long)x.cols, (long long)glen);
    return kcu_rms_norm(cuda_be(be), &y, &x, &g, eps, err);
}

kiln_status cuda_layer_norm_modulate(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, const kiln_tensor *sht,
                                     const kiln_tensor *sct, float eps, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(sht);
    RESIDE(sct);
    kcu_mat y, x, sh, sc;
    KILN_TRY(same_shape_pair(be, yt, xt, "layer_norm_modulate", "y", "x", &y, &x, err));
    KILN_TRY(kcu_as_vec(sht, x.cols, true, "layer_norm_modulate", "shift", &sh, err));
    KILN_TRY(kcu_as_vec(sct, x.cols, true, "layer_norm_modulate", "scale", &sc, err));
    return kcu_layer_norm_modulate(cuda_be(be), &y, &x, sh.data ? &sh : NULL, sc.data ? &sc : NULL, eps, err);
}

kiln_status cuda_rope(kiln_backend *be, kiln_tensor *xt, const kiln_tensor *ct, const kiln_tensor *st, int n_heads,
                      bool interleaved, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(xt);
    RESIDE(ct);
    RESIDE(st);
    kcu_mat x, c, s;
    KILN_TRY(kcu_as_mat(xt, -1, "rope", "x", &x, err));
    KILN_TRY(kcu_as_mat(ct, KILN_DT_F32, "rope", "cos", &c, err));
    KILN_TRY(kcu_as_mat(st, KILN_DT_F32, "rope", "sin", &s, err));
    if (n_heads <= 0 || x.cols % (2 * n_heads))
        return KILN_FAIL(err, KILN_E_INVALID, "rope: width %lld is not %d heads of an even head dim", (long long)x.cols,
                         n_heads);
    int64_t half = x.cols / n_heads / 2;
    if (c.cols != half || s.cols != half || c.rows != s.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "rope: cos/sin must both be [T, %lld], got [%lld, %lld] and [%lld, %lld]",
                         (long long)half, (long long)c.rows, (long long)c.cols, (long long)s.rows, (long long)s.cols);
    if (x.rows == 0) return KILN_OK;
    if (c.rows < 1 || x.rows % c.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "rope: x has %lld rows, not a multiple of the table's %lld",
                         (long long)x.rows, (long long)c.rows);
    return kcu_rope(cuda_be(be), &x, &c, &s, n_heads, interleaved, err);
}

kiln_status cuda_softmax(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    kcu_mat y, x;
    KILN_TRY(same_shape_pair(be, yt, xt, "softmax", "y", "x", &y, &x, err));
    return kcu_softmax(cuda_be(be), &y, &x, err);
}

/* ---- elementwise ---- */

kiln_status cuda_swiglu(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *abt, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(yt);
    RESIDE(abt);
    kcu_mat y, ab;
    KILN_TRY(kcu_as_mat(yt, -1, "swiglu", "y", &y, err));
    KILN_TRY(kcu_as_mat(abt, -1, "swiglu", "ab", &ab, err));
    if (ab.rows != y.rows || ab.cols != 2 * y.cols)
        return KILN_FAIL(err, KILN_E_INVALID, "swiglu: ab [%lld, %lld] must be [%lld, %lld]", (long long)ab.rows,
                         (long long)ab.cols, (long long)y.rows, (long long)(2 * y.cols));
    return kcu_swiglu(cuda_be(be), &y, &ab, err);
}

/* y = f(a, b) for three activations of one shape (silu_mul, gelu_mul, add): the launcher fn runs once all are
 * checked. */
typedef kiln_status (*binary_fn)(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b,
                                 kiln_err *err);

static kiln_status binary(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *at, const kiln_tensor *bt,
                          binary_fn fn, const char *op, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), op, err));
    RESIDE(yt);
    RESIDE(at);
    RESIDE(bt);
    kcu_mat y, a, b;
    KILN_TRY(kcu_as_mat(yt, -1, op, "y", &y, err));
    KILN_TRY(kcu_as_mat(at, -1, op, "a", &a, err));
    KILN_TRY(kcu_as_mat(bt, -1, op, "b", &b, err));
    KILN_TRY(kcu_same_shape(&y, &a, op, "y", "a", err));
    KILN_TRY(kcu_same_shape(&y, &b, op, "y", "b", err));
    return fn(cuda_be(be), &y, &a, &b, err);
}

static kiln_status silu_mul_fn(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b,
                               kiln_err *err) {
    return kcu_act_mul(cb, y, a, b, KCU_ACT_SILU, err);
}
static kiln_status gelu_mul_fn(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b,
                               kiln_err *err) {
    return kcu_act_mul(cb, y, a, b, KCU_ACT_GELU, err);
}

kiln_status cuda_silu_mul(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *at, const kiln_tensor *bt, kiln_err *err) {
    return binary(be, yt, at, bt, silu_mul_fn, "silu_mul", err);
}

kiln_status cuda_gelu_mul(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *at, const kiln_tensor *bt, kiln_err *err) {
    return binary(be, yt, at, bt, gelu_mul_fn, "gelu_mul", err);
}

static kiln_status unary(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, int act, const char *op,
                         kiln_err *err) {
    kcu_mat y, x;
    KILN_TRY(same_shape_pair(be, yt, xt, op, "y", "x", &y, &x, err));
    return kcu_activation(cuda_be(be), &y, &x, act, err);
}

kiln_status cuda_silu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    return unary(be, y, x, KCU_ACT_SILU, "silu", err);
}

kiln_status cuda_gelu_tanh(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    return unary(be, y, x, KCU_ACT_GELU, "gelu_tanh", err);
}

kiln_status cuda_add(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *at, const kiln_tensor *bt, kiln_err *err) {
    return binary(be, yt, at, bt, kcu_add, "add", err);
}

kiln_status cuda_gated_add(kiln_backend *be, kiln_tensor *xt, const kiln_tensor *gt, const kiln_tensor *yt,
                           kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(gt);
    kcu_mat x, g, y;
    KILN_TRY(same_shape_pair(be, xt, yt, "gated_add", "x", "y", &x, &y, err));
    KILN_TRY(kcu_as_vec(gt, x.cols, false, "gated_add", "gate", &g, err));
    return kcu_gated_add(cuda_be(be), &x, &g, &y, err);
}

kiln_status cuda_scale_shift(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, float a, float b, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    kcu_mat y, x;
    KILN_TRY(same_shape_pair(be, yt, xt, "scale_shift", "y", "x", &y, &x, err));
    return kcu_scale_shift(cuda_be(be), &y, &x, a, b, err);
}

static bool convertible(kiln_dtype a, kiln_dtype b) {
    bool fa = a == KILN_DT_F32 || a == KILN_DT_BF16 || a == KILN_DT_F16;
    bool fb = b == KILN_DT_F32 || b == KILN_DT_BF16 || b == KILN_DT_F16;
    return a == b || (fa && fb);
}

kiln_status cuda_copy(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(yt);
    RESIDE(xt);
    kcu_view4 y, x;
    KILN_TRY(kcu_as_view4(yt, "copy", "y", &y, err));
    KILN_TRY(kcu_as_view4(xt, "copy", "x", &x, err));
    if (yt->ndim != xt->ndim || !kiln_tensor_same_shape(yt, xt))
        return KILN_FAIL(err, KILN_E_INVALID, "copy: y and x have different shapes");
    if (!convertible(y.dt, x.dt))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "copy: %s -> %s is not supported on CUDA", kiln_dtype_name(x.dt),
                         kiln_dtype_name(y.dt));
    return kcu_copy4(cuda_be(be), &y, &x, err);
}

/* ---- images ---- */

/* Convolution as GEMM: per image and per chunk of output pixels, im2col into scratch as col [pixels, Ci*kh*kw],
 * then y[n][Co, pixels] = w[Co, K] . col[pixels, K]^T - the same row-major GEMM as matmul, with the weights as
 * the left operand. Chunks cap the scratch at ~256 MiB (a 1024x1024 128-channel 3x3 layer would need 2.4 GB). */
kiln_status cuda_conv2d(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, const kiln_tensor *wt,
                        const kiln_tensor *bt, int stride, int pad_begin, int pad_end, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(wt);
    RESIDE(bt);
    kiln_cuda_backend *cb = cuda_be(be);
    int64_t xd[4], yd[4];
    img_arg y, x;
    KILN_TRY(nchw_pair(be, yt, xt, "conv2d", yd, xd, &y, &x, err));
    if (!wt || wt->ndim != 4 || !kiln_tensor_is_contiguous(wt) || wt->backend != KILN_BACKEND_CUDA ||
        (wt->dtype != KILN_DT_BF16 && wt->dtype != KILN_DT_F32))
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: w must be a contiguous bf16/f32 [Co, Ci, kh, kw] on the device");
    int64_t co = wt->shape[0], ci = wt->shape[1], kh = wt->shape[2], kw = wt->shape[3];
    if (kh != kw || (kh != 1 && kh != 3)) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "conv2d: kernel %lldx%lld", (long long)kh, (long long)kw);
    if (stride != 1 && stride != 2) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "conv2d: stride %d", stride);
    if (pad_begin < 0 || pad_end < 0) return KILN_FAIL(err, KILN_E_INVALID, "conv2d: negative padding");
    if (ci != xd[1]) return KILN_FAIL(err, KILN_E_INVALID, "conv2d: x has %lld channels, w expects %lld", (long long)xd[1], (long long)ci);
    int64_t ho = (xd[2] + pad_begin + pad_end - kh) / stride + 1, wo = (xd[3] + pad_begin + pad_end - kw) / stride + 1;
    if (yd[0] != xd[0] || yd[1] != co || yd[2] != ho || yd[3] != wo)
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: y must be [%lld, %lld, %lld, %lld]", (long long)xd[0],
                         (long long)co, (long long)ho, (long long)wo);
    kcu_mat bias;
    KILN_TRY(kcu_as_vec(bt, co, true, "conv2d", "bias", &bias, err));
    const int64_t k = ci * kh * kw, ldk = (k + 7) / 8 * 8, pix = ho * wo;
    if (xd[0] == 0 || pix == 0 || co == 0) return KILN_OK;
#ifdef KILN_HAVE_CUDNN
    if (cb->conv_cudnn) { /* cuDNN where it takes the call (cuda_cudnn.h), else im2col and a GEMM below */
        kiln_err why = {0};
        kiln_status cs = kcu_cudnn_conv_refusal(be->precision == KILN_PREC_FAST, y.dt, y.data, x.dt, x.data, wt->dtype,
                                                wt->data, &bias)
                             ? KILN_E_UNSUPPORTED
                             : kcu_cudnn_conv2d(cb, y.data, y.dt, x.data, xd, wt->data, co, (int)kh, stride, pad_begin,
                                                pad_end, &bias, &why);
        if (cudnn_done(cs, &why, &cb->cudnn_convs, &cb->conv_fallbacks, err)) return cs;
    }
#endif
    const bool bf16 = wt->dtype == KILN_DT_BF16 && be->precision == KILN_PREC_FAST;
    const kiln_dtype in = bf16 ? KILN_DT_BF16 : KILN_DT_F32;
    const size_t es = bf16 ? 2 : 4;
    const bool stage_w = wt->dtype != in;
    /* a bf16 y is the GEMM's own bf16 output, unless an f32 GEMM (EXACT, f32 weights) or a bias comes first: then
     * the GEMM writes f32 scratch, the bias is added there, and y gets the sum rounded once (as a bf16 conv does) */
    const bool via_p = y.dt != KILN_DT_F32 && (in == KILN_DT_F32 || bias.data);
    int64_t chunk = (int64_t)((256u << 20) / ((size_t)ldk * es));
    if (chunk < 1) chunk = 1;
    if (chunk > pix) chunk = pix;
    size_t off_w = align_up((size_t)chunk * ldk * es);
    size_t off_p = off_w + (stage_w ? align_up((size_t)co * ldk * es) : 0);
    size_t total = off_p + (via_p ? align_up((size_t)co * chunk * 4) : 0);
    KILN_TRY(kcu_scratch_reserve(cb, total, err));
    char *scr = cb->scratch;
    kcu_mat w = {wt->data, co, k, k, wt->dtype};
    if (stage_w) {
        kcu_mat ws = {scr + off_w, co, k, ldk, in};
        KILN_TRY(kcu_convert(cb, &ws, &w, err));
        w = ws;
    }
    const size_t ye = kiln_dtype_size(y.dt);
    for (int64_t n = 0; n < xd[0]; n++) {
        char *yn = (char *)y.data + (size_t)(n * co * pix) * ye;
        for (int64_t p0 = 0; p0 < pix; p0 += chunk) {
            int64_t np = pix - p0 < chunk ? pix - p0 : chunk;
            kcu_mat col = {scr, np, k, ldk, in};
            KILN_TRY(kcu_im2col(cb, &col, x.data, x.dt, xd, n, (int)kh, (int)kw, stride, pad_begin, ho, wo, p0, np,
                                err));
            kcu_mat out = {yn + (size_t)p0 * ye, co, np, pix, y.dt}; /* y[n][:, p0 : p0 + np] */
            kcu_mat p = via_p ? (kcu_mat){scr + off_p, co, np, np, KILN_DT_F32} : out;
            kcu_gemm_key key;
            memset(&key, 0, sizeof key);
            key.m = co, key.n = np, key.k = k;
            key.ldx = w.ld, key.ldw = ldk, key.ldy = p.ld;
            key.in_dtype = in, key.out_dtype = p.dt;
            KILN_TRY(gemm(cb, &key, p.data, w.data, col.data, NULL, err));
            if (via_p && bias.data) KILN_TRY(kcu_bias_nchw(cb, p.data, KILN_DT_F32, &bias, 1, co, np, err));
            if (via_p) KILN_TRY(kcu_convert(cb, &out, &p, err));
        }
    }
    if (bias.data && !via_p) KILN_TRY(kcu_bias_nchw(cb, y.data, y.dt, &bias, yd[0], co, pix, err));
    return KILN_OK;
}

kiln_status cuda_group_norm(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, int groups,
                            const kiln_tensor *gt, const kiln_tensor *bt, float eps, bool silu, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    RESIDE(gt);
    RESIDE(bt);
    int64_t xd[4], yd[4];
    img_arg y, x;
    KILN_TRY(nchw_pair(be, yt, xt, "group_norm", yd, xd, &y, &x, err));
    for (int i = 0; i < 4; i++)
        if (xd[i] != yd[i]) return KILN_FAIL(err, KILN_E_INVALID, "group_norm: y and x differ in shape");
    if (groups <= 0 || xd[1] % groups)
        return KILN_FAIL(err, KILN_E_INVALID, "group_norm: %lld channels are not %d groups", (long long)xd[1], groups);
    kcu_mat g, b;
    KILN_TRY(kcu_as_vec(gt, xd[1], false, "group_norm", "gamma", &g, err));
    KILN_TRY(kcu_as_vec(bt, xd[1], false, "group_norm", "beta", &b, err));
    kiln_cuda_backend *cb = cuda_be(be);
    KILN_TRY(kcu_scratch_reserve(cb, kcu_group_norm_scratch(xd, groups), err));
    return kcu_group_norm(cb, y.data, y.dt, x.data, x.dt, xd, groups, &g, &b, eps, silu, cb->scratch, err);
}

kiln_status cuda_upsample2x(kiln_backend *be, kiln_tensor *yt, const kiln_tensor *xt, kiln_err *err) {
    KILN_TRY(kcu_op_begin(cuda_be(be), __func__, err));
    int64_t xd[4], yd[4];
    img_arg y, x;
    KILN_TRY(nchw_pair(be, yt, xt, "upsample2x", yd, xd, &y, &x, err));
    if (yd[0] != xd[0] || yd[1] != xd[1] || yd[2] != 2 * xd[2] || yd[3] != 2 * xd[3])
        return KILN_FAIL(err, KILN_E_INVALID, "upsample2x: y must be [%lld, %lld, %lld, %lld]", (long long)xd[0],
                         (long long)xd[1], (long long)(2 * xd[2]), (long long)(2 * xd[3]));
    return kcu_upsample2x(cuda_be(be), y.data, y.dt, x.data, x.dt, xd, err);
}

#endif /* KILN_HAVE_CUDA */
