// The RoPE angle sources of the op cases of kernels that rotate q and k as
// they write them (op_cases_qk_norm.cpp, op_cases_row_bias.cpp), each checked
// bit for bit against its composition with rope_forward / rope_backward:
// token positions, packed documents and a decode offset.
#pragma once

#include <random>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {

constexpr float kRopeCaseTheta = 10000.0f;

// Where the rows' angles come from: each row n at position n % T; packed
// documents (random positions in [0, T)); decoding from position 7 (the
// tables from row 7, no positions).
enum class AngleSource { sequence, documents, decoding };
constexpr AngleSource kAngleSources[] = {AngleSource::sequence, AngleSource::documents,
                                         AngleSource::decoding};
constexpr int kDecodeStart = 7;

inline const char* angle_source_name(AngleSource source) {
  return source == AngleSource::sequence    ? "sequence"
         : source == AngleSource::documents ? "documents"
                                            : "decoding";
}

// check(shape, source, offset) for each of the row's shapes (shapes_for:
// B sequences of T rows, H query and KV key heads of D), each angle source
// and each buffer offset of the row, traced.
template <class Shape, size_t kCpu, size_t kCuda, class Check>
void for_each_rope_case(const OpRow& row, const Shape (&cpu)[kCpu], const Shape (&cuda)[kCuda],
                        Check check) {
  for (const Shape& s : shapes_for(row, cpu, cuda))
    for (AngleSource source : kAngleSources)
      for (size_t offset : offsets_for(row)) {
        SCOPED_TRACE(testing::Message()
                     << "B=" << s.B << " T=" << s.T << " H=" << s.H << " KV=" << s.KV << " D="
                     << s.D << " angles=" << angle_source_name(source) << " offset=" << offset);
        check(s, source, offset);
      }
}

// The tables (kDecodeStart + T rows of heads of D) and the two descriptions
// of one source's angles for B sequences of T rows on a backend: `fused`, as
// the parts give it to a fused kernel (BlockContext::rope_angles: the decode
// offset in the table pointers), and for the composition the whole tables
// with each row's position spelled out (decoding: kDecodeStart + n % T), so
// the offset is checked, not shared.
struct RopeCaseAngles {
  Buffer<float> cos, sin;
  Buffer<int32_t> positions;
  RopeAngles fused;
  const int32_t* composed_positions;

  RopeCaseAngles(const Backend& be, int B, int T, int D, AngleSource source, size_t offset,
                 std::mt19937& rng)
      : cos(be, table(T, D, /*cosine=*/true), offset),
        sin(be, table(T, D, /*cosine=*/false), offset),
        positions(be, row_positions(B, T, source, rng)) {
    const size_t decode_first = (size_t)kDecodeStart * (D / 2);
    fused = source == AngleSource::decoding
                ? RopeAngles{cos.get() + decode_first, sin.get() + decode_first, nullptr, T}
                : RopeAngles{cos.get(), sin.get(),
                             source == AngleSource::documents ? positions.get() : nullptr, T};
    composed_positions = source == AngleSource::sequence ? nullptr : positions.get();
  }

  static Floats table(int T, int D, bool cosine) {
    const size_t count = (size_t)(kDecodeStart + T) * (D / 2);
    Floats cos(count), sin(count);
    backend_cpu().rope_table(cos.data(), sin.data(), kDecodeStart + T, D, kRopeCaseTheta,
                             RopeScaling{});
    return cosine ? cos : sin;
  }
  static Ints row_positions(int B, int T, AngleSource source, std::mt19937& rng) {
    Ints positions(B * T);
    std::uniform_int_distribution<int> draw(0, T - 1);
    for (int n = 0; n < B * T; n++)
      positions[n] = source == AngleSource::documents  ? draw(rng)
                     : source == AngleSource::decoding ? kDecodeStart + n % T
                                                       : n % T;
    return positions;
  }
};

}  // namespace llm::op_test
