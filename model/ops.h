// The one dispatch point of model code: each op is overloaded on the storage
// type of its activations (float or Bf16) and forwards to the fp32 or bf16
// entry of the backend's table, so the transformer is written once, as a
// template over that type, and never names a device or a precision.
#pragma once

#include <type_traits>

#include "runtime/bf16.h"
#include "model/backend.h"

namespace llm {

class Ops {
 public:
  explicit Ops(const Backend& backend) : b_(backend) {}

  template <class T>
  void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C) const {
    if constexpr (kIsBf16<T>) b_.embedding_forward_bf16(out, tokens, wte, N, C);
    else b_.embedding_forward(out, tokens, wte, N, C);
  }
  template <class T>
  void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C) const {
    if constexpr (kIsBf16<T>) b_.embedding_backward_bf16(dwte, dout, tokens, N, C);
    else b_.embedding_backward(dwte, dout, tokens, N, C);
  }
  template <class T>
  void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps) const {
    if constexpr (kIsBf16<T>) b_.rmsnorm_forward_bf16(out, rstd, inp, weight, N, C, eps);
    else b_.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  template <class T>
  void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                        const float* rstd, int N, int C) const {
    if constexpr (kIsBf16<T>) b_.rmsnorm_backward_bf16(dinp, dweight, dout, inp, weight, rstd, N, C);
    else b_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }
  template <class T>
  void rope_forward(T* x, const float* cos, const float* sin, int N, int T_, int heads, int D,
                    int stride) const {
    if constexpr (kIsBf16<T>) b_.rope_forward_bf16(x, cos, sin, N, T_, heads, D, stride);
    else b_.rope_forward(x, cos, sin, N, T_, heads, D, stride);
  }
  template <class T>
  void rope_backward(T* dx, const float* cos, const float* sin, int N, int T_, int heads, int D,
                     int stride) const {
    if constexpr (kIsBf16<T>) b_.rope_backward_bf16(dx, cos, sin, N, T_, heads, D, stride);
    else b_.rope_backward(dx, cos, sin, N, T_, heads, D, stride);
  }
  template <class T>
  void attention_forward(T* out, float* lse, const T* qkv, int B, int T_, int H, int KV, int D) const {
    if constexpr (kIsBf16<T>) b_.attention_forward_bf16(out, lse, qkv, B, T_, H, KV, D);
    else b_.attention_forward(out, lse, qkv, B, T_, H, KV, D);
  }
  template <class T>
  void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                          int B, int T_, int H, int KV, int D) const {
    if constexpr (kIsBf16<T>) b_.attention_backward_bf16(dqkv, dout, qkv, out, lse, B, T_, H, KV, D);
    else b_.attention_backward(dqkv, dout, qkv, out, lse, B, T_, H, KV, D);
  }
  template <class T> void swiglu_forward(T* out, const T* h13, int N, int F) const {
    if constexpr (kIsBf16<T>) b_.swiglu_forward_bf16(out, h13, N, F);
    else b_.swiglu_forward(out, h13, N, F);
  }
  template <class T> void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F) const {
    if constexpr (kIsBf16<T>) b_.swiglu_backward_bf16(dh13, dout, h13, N, F);
    else b_.swiglu_backward(dh13, dout, h13, N, F);
  }
  template <class T>
  void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC) const {
    if constexpr (kIsBf16<T>) b_.matmul_forward_bf16(out, inp, weight, N, C, OC);
    else b_.matmul_forward(out, inp, weight, N, C, OC);
  }
  template <class T>
  void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                       int C, int OC) const {
    if constexpr (kIsBf16<T>) b_.matmul_backward_bf16(dinp, dweight, dout, inp, weight, N, C, OC);
    else b_.matmul_backward(dinp, dweight, dout, inp, weight, N, C, OC);
  }
  template <class T> void residual_forward(T* out, const T* a, const T* b, size_t n) const {
    if constexpr (kIsBf16<T>) b_.residual_forward_bf16(out, a, b, n);
    else b_.residual_forward(out, a, b, n);
  }
  template <class T>
  void cross_entropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V) const {
    if constexpr (kIsBf16<T>) b_.cross_entropy_forward_bf16(losses, logits, targets, N, V);
    else b_.cross_entropy_forward(losses, logits, targets, N, V);
  }
  template <class T>
  void cross_entropy_forward_backward(float* losses, T* logits, const int32_t* targets, int N, int V,
                                      float dloss) const {
    if constexpr (kIsBf16<T>) b_.cross_entropy_forward_backward_bf16(losses, logits, targets, N, V, dloss);
    else b_.cross_entropy_forward_backward(losses, logits, targets, N, V, dloss);
  }
  template <class T> void fill_zero(T* x, size_t n) const {
    if constexpr (kIsBf16<T>) b_.fill_zero_bf16(x, n);
    else b_.fill_zero(x, n);
  }
  const Backend& backend() const { return b_; }

 private:
  template <class T> static constexpr bool kIsBf16 = std::is_same_v<T, Bf16>;
  const Backend& b_;
};

}  // namespace llm
