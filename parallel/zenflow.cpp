// ZenFlow's step (see zenflow.h for the semantics).
#include "parallel/zenflow.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "model/kernels/columns.h"
#include "base/error.h"

namespace llm {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool is_matrix(const TensorSpec& t) { return t.shape.size() >= 2; }

size_t chosen_count(const TensorSpec& t, double topk_ratio) {
  if (!is_matrix(t)) return t.numel;
  const size_t cols = static_cast<size_t>(t.shape.back());
  const auto k = static_cast<size_t>(std::ceil(topk_ratio * static_cast<double>(cols)));
  return std::clamp<size_t>(k, 1, cols);
}

// sum += scale * g over n elements (the worker's OpenMP threads).
void accumulate_scaled(float* sum, const float* g, float scale, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) sum[i] += scale * g[i];
}

// The k columns of largest norm (ties: the lower column first).
std::vector<int32_t> top_columns(const float* norms, size_t cols, size_t k) {
  std::vector<int32_t> order(cols);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
      [&](int32_t a, int32_t b) { return norms[a] > norms[b] || (norms[a] == norms[b] && a < b); });
  order.resize(k);
  return order;
}

}  // namespace

void ZenFlow::list_buffers(const ParameterLayout& layout, const std::vector<UnitShard>& shards,
                           double topk_ratio, std::vector<Piece>& pieces, float*& norms,
                           StatePlans& plans) {
  pieces.clear();
  for (size_t u = 0; u < shards.size(); ++u) {
    const UnitShard& s = shards[u];
    for (int ti : layout.units[u].tensors) {
      const TensorSpec& t = layout.tensors[ti];
      const size_t lo = std::max(s.begin, t.offset),
                   hi = std::min(s.begin + s.owned, t.offset + t.numel);
      if (lo >= hi) continue;
      Piece p;
      p.unit = static_cast<int>(u);
      p.tensor = ti;
      p.lo = lo - t.offset;
      p.hi = hi - t.offset;
      p.slice_offset = lo - s.begin;
      p.cols = is_matrix(t) ? static_cast<size_t>(t.shape.back()) : t.numel;
      p.k = chosen_count(t, topk_ratio);
      p.always_chosen = !is_matrix(t);
      p.compact = columns_compact_rows(p.lo, p.hi, p.cols) * p.k;
      pieces.push_back(p);
    }
  }
  for (Piece& p : pieces) {  // sized before slots are listed
    plans.optimizer.add(p.chosen, p.k);
    for (float** state : {&p.masters, &p.m, &p.v, &p.grads}) plans.optimizer.add(*state, p.compact);
  }
  size_t norm_count = 0;
  column_norm_offsets(layout, norm_count);
  plans.buffers.add(norms, norm_count);
}

ZenFlow::ZenFlow(const ParameterLayout& layout, const Config& config,
                 const std::vector<UnitShard>& shards, const Backend& device, Topology& topology,
                 ParamStore& params, GradStore& grads, HostOptimizer& host, StatePlans& plans)
    : layout_(layout),
      training_(config.training),
      zenflow_(config.zenflow),
      shards_(shards),
      be_(device),
      topo_(topology),
      params_(params),
      grads_(grads),
      host_(host),
      update_interval_(config.zenflow.update_interval.automatic()
                           ? kZenFlowAutoUpdateIntervalStart
                           : config.zenflow.update_interval.value) {
  list_buffers(layout, shards, zenflow_.topk_ratio, pieces_, norms_, plans);
  norm_offset_ = column_norm_offsets(layout, norm_count_);
  stats_.update_interval = update_interval_;
}

ZenFlow::~ZenFlow() {
  try {
    host_.wait_for_worker();
  } catch (...) {
    // A job's error was reported, or is moot now that the run is over.
  }
}

std::vector<size_t> ZenFlow::column_norm_offsets(const ParameterLayout& layout, size_t& count) {
  std::vector<size_t> offsets(layout.tensors.size(), 0);
  count = 0;
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    if (!is_matrix(layout.tensors[t])) continue;
    offsets[t] = count;
    count += static_cast<size_t>(layout.tensors[t].shape.back());
  }
  return offsets;
}

int ZenFlow::select_interval() const {
  if (zenflow_.select_strategy == SelectStrategy::epoch && steps_per_epoch_ > 0)
    return steps_per_epoch_;
  return zenflow_.select_interval.automatic() ? update_interval_ : zenflow_.select_interval.value;
}

// --- choosing columns -------------------------------------------------------------

void ZenFlow::choose_columns() {
  if (chosen_) hand_back_columns();
  be_.f32.fill_zero(norms_, norm_count_);
  for (const Piece& p : pieces_) {
    if (p.always_chosen) continue;
    be_.column_sum_squares(norms_ + norm_offset_[p.tensor], grads_.reduced(p.unit) + p.slice_offset,
                           p.lo, p.hi, p.cols);
  }
  if (topo_.shard->size() > 1 && norm_count_ > 0) {
    topo_.shard->all_reduce(norms_, norm_count_, WireType::f32);
    stats_.selection_bytes += norm_count_ * sizeof(float);
  }
  std::vector<float> norms(norm_count_);
  be_.memory->to_host(norms.data(), norms_, norm_count_ * sizeof(float));
  for (Piece& p : pieces_) {
    p.chosen_host.resize(p.k);
    if (p.always_chosen)
      std::iota(p.chosen_host.begin(), p.chosen_host.end(), 0);
    else
      p.chosen_host = top_columns(norms.data() + norm_offset_[p.tensor], p.cols, p.k);
    be_.memory->to_device(p.chosen, p.chosen_host.data(), p.k * sizeof(int32_t));
    // The chosen columns' state moves from the host's slices to the device.
    const HostOptimizer::Unit& h = host_.unit(p.unit);
    for (auto [host, device] :
         {std::pair{h.masters, p.masters}, std::pair{h.m, p.m}, std::pair{h.v, p.v}}) {
      chosen_to_device(p, host, device);
    }
  }
  chosen_ = true;
  since_selection_ = 0;
  stats_.selections++;
}

void ZenFlow::chosen_to_device(const Piece& p, const float* host_slice, float* compact) {
  std::vector<float> staged(p.compact);
  backend_cpu().gather_columns(staged.data(), host_slice + p.slice_offset, p.lo, p.hi, p.cols,
                               p.chosen_host.data(), p.k);
  be_.memory->to_device(compact, staged.data(), p.compact * sizeof(float));
}

void ZenFlow::chosen_to_host(const Piece& p, const float* compact, float* host_slice) {
  std::vector<float> staged(p.compact);
  be_.memory->to_host(staged.data(), compact, p.compact * sizeof(float));
  backend_cpu().f32.scatter_columns(host_slice + p.slice_offset, staged.data(), p.lo, p.hi, p.cols,
                                    p.chosen_host.data(), p.k);
}

void ZenFlow::hand_back_columns() {
  host_.wait_for_worker();  // the host slices are rewritten: no upload may still read them
  for (const Piece& p : pieces_) {
    const HostOptimizer::Unit& h = host_.unit(p.unit);
    for (auto [device, host] :
         {std::pair{p.masters, h.masters}, std::pair{p.m, h.m}, std::pair{p.v, h.v}}) {
      chosen_to_host(p, device, host);
    }
  }
  // The host's compute copy of the returned columns was overwritten by
  // interval updates while the device owned them: cast it afresh.
  for (size_t u = 0; u < shards_.size(); ++u) {
    const HostOptimizer::Unit& h = host_.unit(static_cast<int>(u));
    if (h.compute) backend_cpu().cast_f32_to_bf16(h.compute, h.masters, shards_[u].owned);
  }
  chosen_ = false;
}

void ZenFlow::current_masters(int unit, float* out) {
  host_.wait_for_worker();
  const HostOptimizer::Unit& h = host_.unit(unit);
  std::copy(h.masters, h.masters + shards_[unit].owned, out);
  if (!chosen_) return;
  for (const Piece& p : pieces_) {
    if (p.unit == unit) chosen_to_host(p, p.masters, out);
  }
}

// --- one step -------------------------------------------------------------------

void ZenFlow::update_chosen_on_device(const AdamWStep& step) {
  for (const Piece& p : pieces_) {
    be_.gather_columns(p.grads, grads_.reduced(p.unit) + p.slice_offset, p.lo, p.hi, p.cols,
                       p.chosen, p.k);
    optimizer_update_elements(be_, training_, step, layout_.tensors[p.tensor], p.compact, p.masters,
                              nullptr, p.grads, p.m, p.v);
  }
  scatter_chosen();
}

void ZenFlow::scatter_chosen() {
  const bool bf16 = stores_bf16(training_.precision);
  for (const Piece& p : pieces_) {
    void* compute = params_.owned_compute(p.unit);
    if (bf16) {
      be_.bf16.scatter_columns(static_cast<Bf16*>(compute) + p.slice_offset, p.masters, p.lo, p.hi,
                               p.cols, p.chosen, p.k);
    } else {
      be_.f32.scatter_columns(static_cast<float*>(compute) + p.slice_offset, p.masters, p.lo, p.hi,
                              p.cols, p.chosen, p.k);
    }
  }
}

void ZenFlow::accumulate_on_host(const AdamWStep& step) {
  for (int unit : host_.landing_order()) {
    host_.fetch_grads(unit);
    const size_t owned = shards_[unit].owned;
    const HostOptimizer::Unit& h = host_.unit(unit);
    const float scale = step.grad_scale;
    host_.queue([&h, owned, scale] { accumulate_scaled(h.accumulated, h.grads, scale, owned); },
                /*reads_grads_of=*/unit);
  }
}

void ZenFlow::queue_host_update(const AdamWStep& step, int steps) {
  const AdamWStep mean{step.lr, 1.0f / static_cast<float>(steps), step.t};
  auto started = std::make_shared<double>();
  host_.queue([started] { *started = wall_seconds(); });
  for (size_t u = 0; u < shards_.size(); ++u) {
    const int unit = static_cast<int>(u);
    host_.queue_update(unit, mean, host_.unit(unit).accumulated);
  }
  host_.queue([this, started] {
    for (size_t u = 0; u < shards_.size(); ++u) {
      std::fill_n(host_.unit(static_cast<int>(u)).accumulated, shards_[u].owned, 0.0f);
    }
    host_update_seconds_ = wall_seconds() - *started;
  });
  stats_.host_updates++;
}

void ZenFlow::publish_host_update() {
  host_.upload_all();
  if (chosen_) scatter_chosen();  // the host's copies of chosen columns are stale
}

void ZenFlow::adapt_update_interval() {
  const double host_seconds = host_update_seconds_.load();
  if (!zenflow_.update_interval.automatic() || host_seconds <= 0 || step_seconds_ <= 0) return;
  // Host time the device would wait for, per interval, kept within 5% of the
  // steps it is spread over.
  const double exposed =
      zenflow_.overlap_step ? std::max(0.0, host_seconds - step_seconds_) : host_seconds;
  const int wanted =
      std::clamp(static_cast<int>(std::ceil(exposed / (0.05 * step_seconds_))), 1, 16);
  // Rank 0's measurement decides, so every rank keeps the same schedule.
  update_interval_ = static_cast<int>(
      std::lround(topo_.world.all_reduce_sum(topo_.world.rank() == 0 ? wanted : 0)));
  stats_.update_interval = update_interval_;
}

void ZenFlow::step(const AdamWStep& step) {
  const double now = wall_seconds();
  if (step_started_ >= 0) step_seconds_ = now - step_started_;
  step_started_ = now;
  host_.wait_for_worker();
  if (pending_) publish_host_update();
  pending_ = false;
  last_step_ = step;
  if (step.t <= zenflow_.full_warm_up_rounds) {
    host_.step(step);  // never delayed: config validation refuses delayed_update with ZenFlow
    return;
  }
  if (in_interval_ == 0 && (!chosen_ || since_selection_ >= select_interval())) choose_columns();
  update_chosen_on_device(step);
  accumulate_on_host(step);
  ++in_interval_;
  ++since_selection_;
  if (in_interval_ == update_interval_) {
    queue_host_update(step, in_interval_);
    in_interval_ = 0;
    if (zenflow_.overlap_step) {
      pending_ = true;
    } else {
      host_.wait_for_worker();
      publish_host_update();
    }
    adapt_update_interval();
  }
  params_.after_update();
}

void ZenFlow::settle() {
  host_.wait_for_worker();
  if (pending_) publish_host_update();
  pending_ = false;
  if (in_interval_ > 0) {
    queue_host_update(last_step_, in_interval_);
    in_interval_ = 0;
    host_.wait_for_worker();
    publish_host_update();
  }
  if (chosen_) hand_back_columns();
  since_selection_ = 0;
  params_.after_update();
}

void ZenFlow::reset() {
  host_.wait_for_worker();
  pending_ = chosen_ = false;
  in_interval_ = since_selection_ = 0;
  for (size_t u = 0; u < shards_.size(); ++u) {
    std::fill_n(host_.unit(static_cast<int>(u)).accumulated, shards_[u].owned, 0.0f);
  }
}

}  // namespace llm
