// Deterministic random numbers that do not depend on the standard library's
// implementation-defined distributions.
// Invariant: normal_at(key, i) depends only on (key, i), so any slice of a
// tensor can be initialized on its own and still match the full tensor bit for
// bit (what sharded initialization needs).
#pragma once

#include <cmath>
#include <cstdint>

namespace llm {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t hash_mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

// Uniform in (0, 1) from the top 53 bits.
inline double uniform_from_bits(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal deviate for element `index` of the stream `key` (Box-Muller).
inline float normal_at(uint64_t key, uint64_t index) {
  uint64_t h = hash_mix(key, index);
  double u1 = uniform_from_bits(h);
  double u2 = uniform_from_bits(splitmix64(h));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Sequential generator for sampling and shuffling.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  double next_uniform() { return uniform_from_bits(next_u64()); }
  // Uniform integer in [0, n) (n > 0); modulo bias is below 2^-40 for n < 2^24.
  uint64_t next_below(uint64_t n) { return next_u64() % n; }

 private:
  uint64_t state_;
};

}  // namespace llm
