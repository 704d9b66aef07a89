/* lt_probe.cu - what cuBLASLt takes on this GPU, for the two GEMM findings of the first H200 run (issue 23):
 *
 *   fp8   e4m3 x e4m3 GEMMs (kiln's KILN_CUDA_FP8 layout: TN, A = weight [n,k], B = activation [m,k]) were given an
 *         algorithm by the heuristic and then refused by cublasLtMatmul ("not supported"). One line per variant:
 *         output type, scale pointers set or not, alignment preferences set or not, beta, split-K reductions
 *         allowed or not; the heuristic's answer and the matmul's status.
 *   fp8dev the fix (cuda_gemm.cu): the same e4m3 x e4m3 GEMMs without A/B scale pointers, the scales' product as
 *         alpha and beta both device pointers (CUBLASLT_POINTER_MODE_DEVICE), bf16 and f32 outputs, beta 0 and 1,
 *         the three shapes; per variant whether cublasLtMatmul succeeds and the rel_l2 of the output against a
 *         float64 reference on the host (e4m3 decoded with __nv_fp8_e4m3; a sample of rows and columns for the big
 *         shape), and a last line "fp8dev: N/M variants ran, worst rel_l2 X".
 *   bf16  y += x . w^T on a bf16 y (beta = 1) came out with rel_l2 2.9e-3 against the f32 result rounded once: per
 *         reduction-scheme mask, the algorithm's split-K count and scheme and the error against float64.
 *
 * Build: nvcc -O2 -arch=sm_90 tests/gpu/lt_probe.cu -lcublasLt -o lt_probe. Prints lines; exit 0 unless CUDA fails. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

#include "lt_tn.cuh"

static unsigned rng = 12345u;
static float frand(void) { /* [-1, 1) */
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static void *dev_copy(const void *h, size_t n) {
    void *d;
    CK(cudaMalloc(&d, n));
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

/* ---- fp8 ---- */
static void fp8_case(cublasLtHandle_t lt, int m, int n, int k, bool out_f32, bool scales, bool align_pref, float beta,
                     bool reductions, void *ws, size_t ws_bytes) {
    size_t nw = (size_t)n * k, nx = (size_t)m * k;
    unsigned char *hw = (unsigned char *)malloc(nw), *hx = (unsigned char *)malloc(nx);
    for (size_t i = 0; i < nw; i++) hw[i] = (unsigned char)(rng = rng * 1664525u + 1013904223u, (rng >> 24) & 0x77);
    for (size_t i = 0; i < nx; i++) hx[i] = (unsigned char)(rng = rng * 1664525u + 1013904223u, (rng >> 24) & 0x77);
    void *w = dev_copy(hw, nw), *x = dev_copy(hx, nx), *y;
    CK(cudaMalloc(&y, (size_t)m * n * 4));
    CK(cudaMemset(y, 0, (size_t)m * n * 4));
    float hs[2] = {0.5f, 0.25f};
    float *s = (float *)dev_copy(hs, sizeof hs);
    lt_tn g = {};
    lt_tn_make(&g, CUDA_R_8F_E4M3, out_f32 ? CUDA_R_32F : CUDA_R_16BF, m, n, k, ws_bytes, align_pref, reductions);
    if (scales) {
        const float *sa = s, *sb = s + 1;
        cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
        cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    cublasLtMatmulHeuristicResult_t res[8];
    int found = 0;
    cublasStatus_t h = lt_tn_heuristic(lt, &g, 8, res, &found);
    printf("fp8 %5d x %5d x %5d out %-4s scales %d alignpref %d beta %.0f reductions %d: heuristic %s, %d algos;",
           m, n, k, out_f32 ? "f32" : "bf16", scales, align_pref, beta, reductions, cublasLtGetStatusString(h), found);
    float alpha = 1.0f;
    for (int i = 0; i < found && i < 3; i++) {
        cublasStatus_t r = lt_tn_run(lt, &g, &res[i].algo, &alpha, w, x, &beta, y, ws,
                                     res[i].workspaceSize <= ws_bytes ? res[i].workspaceSize : ws_bytes);
        cudaError_t e = cudaDeviceSynchronize();
        printf(" algo %d (ws %zu): %s/%s", i, res[i].workspaceSize, cublasLtGetStatusString(r), cudaGetErrorString(e));
    }
    printf("\n");
    lt_tn_free(&g);
    cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(s);
    free(hw), free(hx);
}

/* ---- fp8 with the scales' product as a device alpha, beta in device memory (what kiln does now) ---- */
static int fp8dev_ran = 0, fp8dev_total = 0;
static double fp8dev_worst = 0;

static unsigned char e4m3_code(void) { /* a random e4m3 code, sign included, never NaN (bit 3 clear: not 0x7f) */
    rng = rng * 1664525u + 1013904223u;
    return (unsigned char)((rng >> 24) & 0xf7);
}
static double e4m3_val(unsigned char c) {
    __nv_fp8_e4m3 v;
    v.__x = c;
    return (double)(float)v;
}

static void fp8_dev_case(cublasLtHandle_t lt, int m, int n, int k, bool out_f32, float beta_v, void *ws,
                         size_t ws_bytes) {
    size_t nw = (size_t)n * k, nx = (size_t)m * k, ny = (size_t)m * n, es = out_f32 ? 4 : 2;
    unsigned char *hw = (unsigned char *)malloc(nw), *hx = (unsigned char *)malloc(nx);
    for (size_t i = 0; i < nw; i++) hw[i] = e4m3_code();
    for (size_t i = 0; i < nx; i++) hx[i] = e4m3_code();
    /* y: row-major [m, n] (column-major [n, m]), random when beta = 1 */
    void *hy = malloc(ny * es);
    for (size_t i = 0; i < ny; i++) {
        float v = frand();
        if (out_f32) ((float *)hy)[i] = v;
        else ((__nv_bfloat16 *)hy)[i] = __float2bfloat16(v);
    }
    void *w = dev_copy(hw, nw), *x = dev_copy(hx, nx), *y = dev_copy(hy, ny * es);
    const float sw = 0.0173f, sx = 0.37f;
    float hab[2] = {sw * sx, beta_v}; /* alpha = scale_w * scale_x, beta: both device memory */
    float *ab = (float *)dev_copy(hab, sizeof hab);
    lt_tn g = {};
    lt_tn_make(&g, CUDA_R_8F_E4M3, out_f32 ? CUDA_R_32F : CUDA_R_16BF, m, n, k, ws_bytes, true, true);
    cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
    cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t h = lt_tn_heuristic(lt, &g, 1, &res, &found);
    printf("fp8dev %5d x %5d x %5d out %-4s beta %.0f (device alpha/beta): heuristic %s, %d algos;", m, n, k,
           out_f32 ? "f32" : "bf16", beta_v, cublasLtGetStatusString(h), found);
    fp8dev_total++;
    if (h == CUBLAS_STATUS_SUCCESS && found > 0) {
        cublasStatus_t r = lt_tn_run(lt, &g, &res.algo, ab, w, x, ab + 1, y, ws,
                                     res.workspaceSize <= ws_bytes ? res.workspaceSize : ws_bytes);
        cudaError_t e = cudaDeviceSynchronize();
        printf(" matmul %s/%s", cublasLtGetStatusString(r), cudaGetErrorString(e));
        if (r == CUBLAS_STATUS_SUCCESS && e == cudaSuccess) {
            void *out = malloc(ny * es);
            CK(cudaMemcpy(out, y, ny * es, cudaMemcpyDeviceToHost));
            /* float64 reference on up to 64 x 64 evenly spaced outputs (all of them for the small shapes) */
            int si = m < 64 ? m : 64, sj = n < 64 ? n : 64;
            double se = 0, sr = 0;
            for (int ii = 0; ii < si; ii++)
                for (int jj = 0; jj < sj; jj++) {
                    size_t i = (size_t)ii * m / si, j = (size_t)jj * n / sj;
                    double prod = 0;
                    for (int kk = 0; kk < k; kk++) prod += e4m3_val(hx[i * k + kk]) * e4m3_val(hw[j * k + kk]);
                    double y0 = out_f32 ? ((float *)hy)[i * n + j] : __bfloat162float(((__nv_bfloat16 *)hy)[i * n + j]);
                    double ref = (double)sw * (double)sx * prod + (double)beta_v * y0;
                    double got = out_f32 ? ((float *)out)[i * n + j] : __bfloat162float(((__nv_bfloat16 *)out)[i * n + j]);
                    se += (got - ref) * (got - ref), sr += ref * ref;
                }
            double rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
            printf(", rel_l2 vs float64 %.2e (%d outputs)", rel, si * sj);
            fp8dev_ran++;
            if (rel > fp8dev_worst) fp8dev_worst = rel;
            free(out);
        }
    }
    printf("\n");
    lt_tn_free(&g);
    cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(ab);
    free(hw), free(hx), free(hy);
}

/* ---- bf16 y += x w^T, beta = 1 ---- */
static float bf(float v) { return __bfloat162float(__float2bfloat16(v)); }

static void bf16_acc_case(cublasLtHandle_t lt, int m, int n, int k, uint32_t mask, const char *mask_name, void *ws,
                          size_t ws_bytes) {
    __nv_bfloat16 *hx = (__nv_bfloat16 *)malloc((size_t)m * k * 2), *hw = (__nv_bfloat16 *)malloc((size_t)n * k * 2);
    __nv_bfloat16 *hy = (__nv_bfloat16 *)malloc((size_t)m * n * 2);
    for (int i = 0; i < m * k; i++) hx[i] = __float2bfloat16(frand());
    for (int i = 0; i < n * k; i++) hw[i] = __float2bfloat16(frand());
    for (int i = 0; i < m * n; i++) hy[i] = __float2bfloat16(frand());
    void *x = dev_copy(hx, (size_t)m * k * 2), *w = dev_copy(hw, (size_t)n * k * 2), *y = dev_copy(hy, (size_t)m * n * 2);
    lt_tn g = {};
    lt_tn_make(&g, CUDA_R_16BF, CUDA_R_16BF, m, n, k, ws_bytes, false, true);
    cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t h = lt_tn_heuristic(lt, &g, 1, &res, &found);
    if (h != CUBLAS_STATUS_SUCCESS || !found) {
        printf("bf16 beta=1 %dx%dx%d mask %-12s: no algorithm (%s)\n", m, n, k, mask_name, cublasLtGetStatusString(h));
        lt_tn_free(&g);
        return;
    }
    int32_t splitk = 0, scheme = 0;
    size_t got = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &got);
    cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, &got);
    float alpha = 1.0f, beta = 1.0f;
    cublasStatus_t r = lt_tn_run(lt, &g, &res.algo, &alpha, w, x, &beta, y, ws, res.workspaceSize);
    CK(cudaDeviceSynchronize());
    __nv_bfloat16 *out = (__nv_bfloat16 *)malloc((size_t)m * n * 2);
    CK(cudaMemcpy(out, y, (size_t)m * n * 2, cudaMemcpyDeviceToHost));
    /* the output against: the float64 result rounded once to bf16; the product rounded to bf16 first, then
     * added to y and rounded again (PyTorch's unfused y + linear(x) in bf16) */
    double e_once = 0, e_twice = 0, r2 = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double prod = 0, c0 = __bfloat162float(hy[i * n + j]);
            for (int kk = 0; kk < k; kk++)
                prod += (double)__bfloat162float(hx[i * k + kk]) * (double)__bfloat162float(hw[j * k + kk]);
            double got = __bfloat162float(out[i * n + j]), once = bf((float)(c0 + prod));
            double twice = bf(bf((float)prod) + (float)c0);
            e_once += (got - once) * (got - once), e_twice += (got - twice) * (got - twice);
            r2 += (c0 + prod) * (c0 + prod);
        }
    printf("bf16 beta=1 %dx%dx%d mask %-8s: %s, split-K %d, scheme %d, ws %zu: rel_l2 vs rounded once %.2e, vs "
           "product rounded first %.2e\n", m, n, k, mask_name, cublasLtGetStatusString(r), splitk, scheme,
           res.workspaceSize, sqrt(e_once / r2), sqrt(e_twice / r2));
    lt_tn_free(&g);
    cudaFree(x), cudaFree(w), cudaFree(y);
    free(hx), free(hw), free(hy), free(out);
}

int main(void) {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device %s sm_%d%d, cuBLASLt %zu\n", p.name, p.major, p.minor, cublasLtGetVersion());
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
    size_t ws_bytes = 32u << 20;
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    const int shapes[][3] = {{4608, 27648, 3072}, {64, 48, 256}, {37, 48, 256}};
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 6; v++) {
            bool out_f32 = v == 1, scales = v != 2, align = v != 3, red = v != 4;
            float beta = v == 5 ? 1.0f : 0.0f;
            fp8_case(lt, shapes[s][0], shapes[s][1], shapes[s][2], out_f32, scales, align, beta, red, ws, ws_bytes);
        }
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 4; v++)
            fp8_dev_case(lt, shapes[s][0], shapes[s][1], shapes[s][2], v & 1, v & 2 ? 1.0f : 0.0f, ws, ws_bytes);
    printf("fp8dev: %d/%d variants ran, worst rel_l2 %.2e (bf16 outputs: one bf16 rounding, ~2e-3)\n", fp8dev_ran,
           fp8dev_total, fp8dev_worst);
    const struct { uint32_t mask; const char *name; } masks[] = {
        {CUBLASLT_REDUCTION_SCHEME_MASK, "all"},           {CUBLASLT_REDUCTION_SCHEME_NONE, "none"},
        {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, "compute"}, {CUBLASLT_REDUCTION_SCHEME_INPLACE, "inplace"},
        {CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, "output"}};
    for (int i = 0; i < 5; i++) bf16_acc_case(lt, 65, 72, 200, masks[i].mask, masks[i].name, ws, ws_bytes);
    for (int i = 0; i < 3; i++) bf16_acc_case(lt, 77, 300, 256, masks[i].mask, masks[i].name, ws, ws_bytes);
    cudaFree(ws);
    cublasLtDestroy(lt);
    return 0;
}
