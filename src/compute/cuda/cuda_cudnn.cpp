/* cuda_cudnn.cpp - cuDNN's SDPA and convolutions through its frontend's graph API (see cuda_cudnn.h).
 *
 * One graph per shape (attention: sizes, heads, row strides, causal, scale; convolution: the image, the filter,
 * stride, paddings, y's and the bias's dtype): built, checked and compiled at its
 * first call outside a CUDA-graph capture (that may allocate and synchronise), kept in a small cache, executed on
 * the backend's stream afterwards - also inside a capture, where it records like any kernel. A shape cuDNN
 * refuses is remembered as refused (with cuDNN's reason, logged once) and runs on kiln's own kernels from then on. The
 * frontend throws on a missing symbol: every call into it is inside a try. The CUDA runtime is called directly,
 * not through cuda_rt.cu: the test of kcu_cudnn_check_graph links this file without the rest of the backend. */
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "base/log.h"
#include "compute/cuda/cuda_cudnn.h"
#include "compute/cuda/cuda_internal.h"
}

namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr; /* the frontend's dynamic loading resolves every cuDNN symbol in it */
}
namespace fe = cudnn_frontend;

namespace {

enum uid : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_X, UID_W, UID_B, UID_Y };

/* One cached graph's shape, compared bytewise (no padding: two ints, then int64s). Attention: sq, sk, the four
 * row strides, hq, hk, dh, causal, and the scale's bits. Convolution: n, ci, h, w, co, kh, stride, the paddings,
 * y's and the bias's dtype (-1: none). */
struct shape {
    int32_t kind; /* KIND_ATTENTION or KIND_CONV */
    int32_t sm;
    int64_t v[12];
    bool operator==(const shape &o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};
static_assert(sizeof(shape) == 8 + 12 * 8, "shape has no padding (compared bytewise)");
enum { KIND_ATTENTION = 1, KIND_CONV = 2 };

struct plan {
    shape key;
    std::shared_ptr<fe::graph::Graph> graph; /* null: cuDNN refused this shape */
    void *workspace;
};

struct state {
    cudnnHandle_t handle = nullptr;
    std::vector<plan> plans; /* oldest first */
};

constexpr size_t MAX_PLANS = 32;
std::mutex load_mu;
std::string load_error; /* set once loading failed: every later open says the same */

/* cuDNN itself, once per process: KILN_CUDNN names the file, else the loader finds libcudnn.so.9 */
kiln_status load(kiln_err *err) {
    std::lock_guard<std::mutex> lock(load_mu);
    if (fe::cudnn_dlhandle) return KILN_OK;
    if (load_error.empty()) {
        const char *name = getenv("KILN_CUDNN");
        if (!name || !*name) name = "libcudnn.so.9";
        /* the frontend's own CUDA runtime calls: the runtime kiln runs on (it would try libcudart.so.12 first) */
        static const std::string rt = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
        setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", rt.c_str(), 0);
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            load_error = std::string("cannot load ") + name + ": " + (e ? e : "?") +
                         " (KILN_CUDNN=path/to/libcudnn.so.9, or its folder on LD_LIBRARY_PATH)";
        } else {
            fe::cudnn_dlhandle = h;
            size_t v = 0;
            try {
                v = fe::detail::get_backend_version();
            } catch (const std::exception &ex) {
                load_error = std::string(name) + ": " + ex.what();
            }
            if (load_error.empty() && v < 90000)
                load_error = std::string(name) + " is cuDNN " + std::to_string(v) + ", older than 9.0";
            if (!load_error.empty()) {
                fe::cudnn_dlhandle = nullptr;
                dlclose(h);
            } else {
                log_info("cuda: cuDNN %zu loaded from %s", v, name);
            }
        }
    }
    if (!load_error.empty()) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN: %s", load_error.c_str());
    return KILN_OK;
}

/* Q [1, hq, sq, dh] over kiln's row-major [sq, hq * dh] (row stride ld), and likewise K, V and O: one head is a
 * column block, so a head's stride is dh and a token's is ld */
std::shared_ptr<fe::graph::Tensor_attributes> bshd(fe::graph::Graph &g, const char *name, int64_t uid, int64_t s,
                                                   int64_t h, int64_t dh, int64_t ld) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({1, h, s, dh})
                        .set_stride({s * ld, dh, ld, 1}));
}

std::shared_ptr<fe::graph::Graph> new_graph(int sm) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT)
        .set_sm_version(sm);
    return g;
}

shape attention_shape(int sm, int64_t sq, int64_t sk, int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo, int hq, int hk,
                      int dh, bool causal, float scale) {
    shape k;
    std::memset(&k, 0, sizeof k);
    k.kind = KIND_ATTENTION, k.sm = sm;
    uint32_t bits;
    std::memcpy(&bits, &scale, sizeof bits);
    int64_t v[] = {sq, sk, ldq, ldk, ldv, ldo, hq, hk, dh, causal ? 1 : 0, (int64_t)bits};
    std::memcpy(k.v, v, sizeof v);
    return k;
}

shape conv_shape(int sm, const int64_t xd[4], int64_t co, int kh, int stride, int pb, int pe, kiln_dtype ydt, int bdt) {
    shape k;
    std::memset(&k, 0, sizeof k);
    k.kind = KIND_CONV, k.sm = sm;
    int64_t v[] = {xd[0], xd[1], xd[2], xd[3], co, kh, stride, pb, pe, (int64_t)ydt, bdt};
    std::memcpy(k.v, v, sizeof v);
    return k;
}

fe::DataType_t fe_dtype(int64_t dt) { return dt == KILN_DT_BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT; }

float scale_of(const shape &k) {
    uint32_t bits = (uint32_t)k.v[10];
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

/* SDPA: out = softmax(q k^T scale [causal]) v */
void attention_graph(fe::graph::Graph &g, const shape &k) {
    const int64_t sq = k.v[0], sk = k.v[1], hq = k.v[6], hk = k.v[7], dh = k.v[8];
    auto q = bshd(g, "Q", UID_Q, sq, hq, dh, k.v[2]);
    auto kk = bshd(g, "K", UID_K, sk, hk, dh, k.v[3]);
    auto v = bshd(g, "V", UID_V, sk, hk, dh, k.v[4]);
    auto opt = fe::graph::SDPA_attributes().set_name("kiln_attention").set_generate_stats(false).set_attn_scale(scale_of(k));
    if (k.v[9]) opt.set_causal_mask(true); /* top-left: query i sees keys 0..i, kiln's rule */
    auto outs = g.sdpa(q, kk, v, opt);
    outs[0]->set_output(true).set_uid(UID_O).set_dim({1, hq, sq, dh}).set_stride({sq * k.v[5], dh, k.v[5], 1});
}

/* y = conv(x, w) (+ bias per output channel), NCHW images, w as [Co, Ci, kh, kw]; f32 accumulation, the sum
 * rounded once into y's dtype */
void conv_graph(fe::graph::Graph &g, const shape &k) {
    const int64_t n = k.v[0], ci = k.v[1], h = k.v[2], w = k.v[3], co = k.v[4], kh = k.v[5], st = k.v[6];
    const int64_t pb = k.v[7], pe = k.v[8], ho = (h + pb + pe - kh) / st + 1, wo = (w + pb + pe - kh) / st + 1;
    auto x = g.tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(UID_X).set_dim({n, ci, h, w})
                          .set_stride({ci * h * w, h * w, w, 1}));
    auto wt = g.tensor(fe::graph::Tensor_attributes().set_name("W").set_uid(UID_W).set_dim({co, ci, kh, kh})
                           .set_stride({ci * kh * kh, kh * kh, kh, 1}));
    auto opt = fe::graph::Conv_fprop_attributes().set_name("kiln_conv").set_pre_padding({pb, pb})
                   .set_post_padding({pe, pe}).set_stride({st, st}).set_dilation({1, 1});
    auto y = g.conv_fprop(x, wt, opt);
    if (k.v[10] >= 0) { /* the bias, fused: one rounding of conv + bias */
        y->set_data_type(fe::DataType_t::FLOAT);
        auto b = g.tensor(fe::graph::Tensor_attributes().set_name("B").set_uid(UID_B).set_dim({1, co, 1, 1})
                              .set_stride({co, 1, 1, 1}).set_data_type(fe_dtype(k.v[10])));
        y = g.pointwise(y, b, fe::graph::Pointwise_attributes().set_name("kiln_bias").set_mode(fe::PointwiseMode_t::ADD));
    }
    y->set_output(true).set_uid(UID_Y).set_dim({n, co, ho, wo}).set_stride({co * ho * wo, ho * wo, wo, 1})
        .set_data_type(fe_dtype(k.v[9]));
}

/* The graph for one shape, validated for its sm (the frontend's own support checks; no GPU needed) */
kiln_status make_graph(const shape &k, std::shared_ptr<fe::graph::Graph> *out, kiln_err *err) {
    auto g = new_graph(k.sm);
    if (k.kind == KIND_ATTENTION) attention_graph(*g, k);
    else conv_graph(*g, k);
    auto st = g->validate();
    if (!st.is_good())
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN %s: %s", k.kind == KIND_ATTENTION ? "SDPA" : "convolution",
                         st.get_message().c_str());
    *out = g;
    return KILN_OK;
}

const char *what(const shape &k) { return k.kind == KIND_ATTENTION ? "SDPA" : "convolution"; }

/* validate, then the backend graph, the heuristics' plans, the support check and the compiled plan */
kiln_status build(state *s, const shape &k, plan *p, kiln_err *err) {
    std::shared_ptr<fe::graph::Graph> g;
    KILN_TRY(make_graph(k, &g, err));
    const char *step = "build_operation_graph";
    auto st = g->build_operation_graph(s->handle);
    if (st.is_good()) step = "create_execution_plans", st = g->create_execution_plans({fe::HeurMode_t::A});
    if (st.is_good()) step = "check_support", st = g->check_support(s->handle);
    if (st.is_good()) step = "build_plans", st = g->build_plans(s->handle);
    if (!st.is_good()) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN %s %s: %s", what(k), step, st.get_message().c_str());
    int64_t ws = 0;
    st = g->get_workspace_size(ws);
    if (!st.is_good()) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN %s workspace: %s", what(k), st.get_message().c_str());
    p->workspace = nullptr;
    if (ws > 0 && cudaMalloc(&p->workspace, (size_t)ws) != cudaSuccess)
        return KILN_FAIL(err, KILN_E_NOMEM, "cuDNN %s: no device memory for a %lld-byte workspace", what(k), (long long)ws);
    p->graph = g;
    return KILN_OK;
}

state *state_of(kiln_cuda_backend *cb) { return static_cast<state *>(cb->cudnn); }

/* For the log: the call a shape stands for */
void describe(const shape &k, char *out, size_t cap) {
    const int64_t *v = k.v;
    if (k.kind == KIND_ATTENTION)
        snprintf(out, cap, "attention %lld x %lld keys, %lld/%lld heads of %lld%s", (long long)v[0], (long long)v[1],
                 (long long)v[6], (long long)v[7], (long long)v[8], v[9] ? ", causal" : "");
    else
        snprintf(out, cap, "conv2d %lldx%lldx%lldx%lld -> %lld channels, %lldx%lld / %lld", (long long)v[0],
                 (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4], (long long)v[5], (long long)v[5],
                 (long long)v[6]);
}

/* The cached plan of key (built at its first call), executed on the backend's stream with these pointers.
 * KILN_E_UNSUPPORTED when cuDNN does not take the shape (said once in the log, with cuDNN's reason). */
kiln_status run(kiln_cuda_backend *cb, const shape &key, std::unordered_map<int64_t, void *> &ptrs, kiln_err *err) {
    state *s = state_of(cb);
    if (!s) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN is not open on this backend");
    try {
        plan *p = nullptr;
        for (plan &c : s->plans)
            if (c.key == key) p = &c;
        if (!p) {
            /* a first build may allocate and synchronise: not inside a capture (kiln's own kernel takes that call) */
            if (cb->capturing) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN %s: a new shape inside a capture", what(key));
            if (s->plans.size() >= MAX_PLANS) { /* the oldest goes; its workspace may be in use until a sync */
                cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(cb->stream));
                if (e != cudaSuccess) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN %s: %s", what(key), cudaGetErrorString(e));
                cudaFree(s->plans.front().workspace);
                s->plans.erase(s->plans.begin());
            }
            plan np{key, nullptr, nullptr};
            kiln_err why = {};
            kiln_status bs = build(s, key, &np, &why);
            if (bs != KILN_OK && bs != KILN_E_UNSUPPORTED) {
                cudaFree(np.workspace);
                if (err) *err = why;
                return bs;
            }
            if (bs != KILN_OK) {
                char desc[160];
                describe(key, desc, sizeof desc);
                log_info("cuda: %s: %s; kiln's own kernel runs it", desc, why.msg);
            }
            s->plans.push_back(np);
            p = &s->plans.back();
        }
        if (!p->graph) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN refused this %s", what(key));
        auto st = p->graph->execute(s->handle, ptrs, p->workspace);
        if (!st.is_good()) return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN %s execute: %s", what(key), st.get_message().c_str());
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN %s: %s", what(key), ex.what());
    }
    return KILN_OK;
}

/* Loads cuDNN and validates key's graph (no GPU). */
kiln_status check(const shape &key, kiln_err *err) {
    KILN_TRY(load(err));
    try {
        std::shared_ptr<fe::graph::Graph> g;
        return make_graph(key, &g, err);
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN %s: %s", what(key), ex.what());
    }
}

int sm_of(const kiln_cuda_backend *cb) { return cb->cc_major * 10 + cb->cc_minor; }

} // namespace

extern "C" kiln_status kcu_cudnn_open(kiln_cuda_backend *cb, kiln_err *err) {
    KILN_TRY(load(err));
    try {
        auto s = std::make_unique<state>();
        cudnnStatus_t rc = fe::detail::create_handle(&s->handle);
        if (rc != CUDNN_STATUS_SUCCESS)
            return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: cudnnCreate: %s", fe::detail::get_error_string(rc));
        rc = fe::detail::set_stream(s->handle, static_cast<cudaStream_t>(cb->stream));
        if (rc != CUDNN_STATUS_SUCCESS) {
            fe::detail::destroy_handle(s->handle);
            return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: cudnnSetStream: %s", fe::detail::get_error_string(rc));
        }
        cb->cudnn = s.release();
    } catch (const std::exception &ex) {
        return KILN_FAIL(err, KILN_E_DEVICE, "cuDNN: %s", ex.what());
    }
    return KILN_OK;
}

extern "C" void kcu_cudnn_close(kiln_cuda_backend *cb) {
    state *s = state_of(cb);
    if (!s) return;
    try {
        for (plan &p : s->plans) cudaFree(p.workspace);
        s->plans.clear();
        if (s->handle) fe::detail::destroy_handle(s->handle);
    } catch (const std::exception &ex) {
        log_warn("cuda: cuDNN at close: %s", ex.what());
    }
    delete s;
    cb->cudnn = nullptr;
}

extern "C" kiln_status kcu_cudnn_attention(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q,
                                           const kcu_mat *k, const kcu_mat *v, int n_q_heads, int n_kv_heads,
                                           float scale, bool causal, kiln_err *err) {
    const char *why = kcu_cudnn_attention_refusal(out, q, k, v, n_q_heads, n_kv_heads, causal, false, false);
    if (why) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuDNN SDPA: %s", why);
    const int dh = (int)(q->cols / n_q_heads);
    shape key = attention_shape(sm_of(cb), q->rows, k->rows, q->ld, k->ld, v->ld, out->ld, n_q_heads, n_kv_heads, dh,
                                causal, scale);
    std::unordered_map<int64_t, void *> ptrs = {{UID_Q, q->data}, {UID_K, k->data}, {UID_V, v->data}, {UID_O, out->data}};
    return run(cb, key, ptrs, err);
}

extern "C" kiln_status kcu_cudnn_conv2d(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x,
                                        const int64_t xd[4], const void *w, int64_t co, int kh, int stride,
                                        int pad_begin, int pad_end, const kcu_mat *bias, kiln_err *err) {
    const bool has_bias = bias && bias->data;
    shape key = conv_shape(sm_of(cb), xd, co, kh, stride, pad_begin, pad_end, ydt, has_bias ? (int)bias->dt : -1);
    std::unordered_map<int64_t, void *> ptrs = {{UID_X, const_cast<void *>(x)}, {UID_W, const_cast<void *>(w)}, {UID_Y, y}};
    if (has_bias) ptrs[UID_B] = bias->data;
    return run(cb, key, ptrs, err);
}

/* For tests/unit/test_compute_cuda_cudnn.c: load cuDNN and validate the graphs kiln would build on sm - the
 * frontend's support checks, no GPU. */
extern "C" kiln_status kcu_cudnn_check_graph(int sm, int64_t sq, int64_t sk, int hq, int hk, int dh, int64_t ld_q,
                                             int64_t ld_kv, bool causal, float scale, kiln_err *err) {
    return check(attention_shape(sm, sq, sk, ld_q, ld_kv, ld_kv, ld_q, hq, hk, dh, causal, scale), err);
}

extern "C" kiln_status kcu_cudnn_check_conv(int sm, const int64_t xd[4], int64_t co, int kh, int stride, int pad_begin,
                                            int pad_end, kiln_dtype ydt, int bias_dt, kiln_err *err) {
    return check(conv_shape(sm, xd, co, kh, stride, pad_begin, pad_end, ydt, bias_dt), err);
}
