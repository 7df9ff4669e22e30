// RoPE tables (transformers' inverse-frequency recipes, in fp32 as it does
// them) and the threaded application.
#include "backend/cpu/kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

constexpr double kPi = 3.14159265358979323846;

// transformers: base ** (arange(0, dim, 2).float() / dim), in fp32.
std::vector<float> PositionFrequencies(double theta, int64_t dim) {
  std::vector<float> freqs(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    freqs[static_cast<size_t>(i)] = std::pow(static_cast<float>(theta), exponent);
  }
  return freqs;
}

// _compute_llama3_parameters: long wavelengths divided by the factor,
// short ones kept, a smooth blend between.
void ApplyLlama3(const RopeScaling& s, int64_t original_max, std::vector<float>& inv_freq) {
  const float factor = static_cast<float>(s.factor);
  const float low_freq_wavelen = static_cast<float>(static_cast<double>(original_max) / s.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(static_cast<double>(original_max) / s.high_freq_factor);
  const float two_pi = static_cast<float>(2 * kPi);
  for (float& inv : inv_freq) {
    const float wavelen = two_pi / inv;
    const float scaled = wavelen > low_freq_wavelen ? inv / factor : inv;
    const float smooth =
        (static_cast<float>(original_max) / wavelen - static_cast<float>(s.low_freq_factor)) /
        static_cast<float>(s.high_freq_factor - s.low_freq_factor);
    // One rounding per operation, as torch does (separate statements keep a
    // compiler from fusing the products into the sums).
    const float from_scaled = (1.0f - smooth) * scaled / factor;
    const float from_unscaled = smooth * scaled;
    const float smoothed = from_scaled + from_unscaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    inv = medium ? smoothed : scaled;
  }
}

// _compute_yarn_parameters: interpolated (divided by the factor) below a
// ramp over the dims, extrapolated (unchanged) above it.
void ApplyYarn(const RopeScaling& s, double theta, int64_t dim, int64_t original_max,
               const std::vector<float>& pos_freqs, std::vector<float>& inv_freq) {
  const double beta_fast = s.beta_fast > 0 ? s.beta_fast : 32.0;
  const double beta_slow = s.beta_slow > 0 ? s.beta_slow : 1.0;
  auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) * std::log(static_cast<double>(original_max) / (rotations * 2 * kPi)) /
           (2 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(s.factor);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float linear = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
    const float ramp = std::clamp(linear, 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float inv_extrapolation = 1.0f / pos_freqs[i];
    const float inv_interpolation = 1.0f / (factor * pos_freqs[i]);
    const float interpolated = inv_interpolation * (1.0f - extrapolation);
    const float extrapolated = inv_extrapolation * extrapolation;
    inv_freq[i] = interpolated + extrapolated;
  }
}

// _compute_longrope_parameters: each inverse frequency divided by its own
// factor, 1 / (ext[i] * pos_freqs[i]) in fp32, the long factors when the
// context exceeds the one the model was trained at (as llama.cpp chooses,
// by the context it runs with). Returns the attention scaling.
double ApplyLongRope(const RopeScaling& s, int64_t original_max, int64_t max_positions,
                     const std::vector<float>& pos_freqs, std::vector<float>& inv_freq) {
  const std::vector<double>& ext = max_positions > original_max ? s.long_factor : s.short_factor;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float divisor = static_cast<float>(ext[i]) * pos_freqs[i];
    inv_freq[i] = 1.0f / divisor;
  }
  return s.LongRopeAttentionFactor();
}

}  // namespace

Expected<RopeTable> RopeTable::Build(int64_t head_dim, int64_t rotary_dim, double theta,
                                     const RopeScaling& scaling, int64_t max_positions) {
  if (head_dim <= 0 || rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    return InvalidArgument("rope: rotary dim {} must be even and in (0, head dim {}]", rotary_dim, head_dim);
  }
  if (!(theta > 0) || !std::isfinite(theta)) return InvalidArgument("rope: theta {} must be positive", theta);
  if (max_positions <= 0) return InvalidArgument("rope: max positions {} must be positive", max_positions);
  if (max_positions > (int64_t{1} << 28) / (rotary_dim / 2)) {
    return OutOfRange("rope: table of {} positions x {} frequencies is too large", max_positions,
                      rotary_dim / 2);
  }
  if (scaling.type != RopeScalingType::kNone && !(scaling.factor > 0)) {
    return InvalidArgument("rope: scaling factor {} must be positive", scaling.factor);
  }
  const int64_t original_max =
      scaling.original_max_position_embeddings > 0 ? scaling.original_max_position_embeddings : max_positions;
  if (scaling.type == RopeScalingType::kLlama3 &&
      (!(scaling.low_freq_factor > 0) || !(scaling.high_freq_factor > scaling.low_freq_factor))) {
    return InvalidArgument("rope: llama3 frequency factors low {} high {} must satisfy 0 < low < high",
                           scaling.low_freq_factor, scaling.high_freq_factor);
  }
  if (scaling.type == RopeScalingType::kLongRope &&
      (scaling.short_factor.size() != static_cast<size_t>(rotary_dim / 2) ||
       scaling.long_factor.size() != static_cast<size_t>(rotary_dim / 2))) {
    return InvalidArgument("rope: longrope needs {} short and long factors, has {} and {}", rotary_dim / 2,
                           scaling.short_factor.size(), scaling.long_factor.size());
  }

  RopeTable table;
  table.head_dim_ = head_dim;
  table.rotary_dim_ = rotary_dim;
  table.max_positions_ = max_positions;
  const std::vector<float> pos_freqs = PositionFrequencies(theta, rotary_dim);
  table.inv_freq_.resize(pos_freqs.size());
  for (size_t i = 0; i < pos_freqs.size(); ++i) table.inv_freq_[i] = 1.0f / pos_freqs[i];
  double attention_scaling = 1.0;
  switch (scaling.type) {
    case RopeScalingType::kNone: break;
    case RopeScalingType::kLinear:
      for (float& inv : table.inv_freq_) inv /= static_cast<float>(scaling.factor);
      break;
    case RopeScalingType::kLlama3: ApplyLlama3(scaling, original_max, table.inv_freq_); break;
    case RopeScalingType::kYarn:
      ApplyYarn(scaling, theta, rotary_dim, original_max, pos_freqs, table.inv_freq_);
      attention_scaling = scaling.attention_factor > 0 ? scaling.attention_factor
                          : scaling.factor <= 1        ? 1.0
                                                       : 0.1 * std::log(scaling.factor) + 1.0;
      break;
    case RopeScalingType::kLongRope:
      attention_scaling = ApplyLongRope(scaling, original_max, max_positions, pos_freqs, table.inv_freq_);
      break;
  }
  table.attention_scaling_ = static_cast<float>(attention_scaling);

  const size_t rows = static_cast<size_t>(max_positions) * pos_freqs.size();
  table.rows_ = std::make_unique<Rows>();
  table.rows_->cos.reset(new float[rows]);
  table.rows_->sin.reset(new float[rows]);
  return table;
}

void RopeTable::RowsBelow(int64_t positions) const {
  Rows& r = *rows_;
  if (positions <= r.filled.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(r.mu);
  const int64_t from = r.filled.load(std::memory_order_relaxed);
  if (positions <= from) return;
  constexpr int64_t kChunk = 1024;
  const int64_t to = std::min(max_positions_, (positions + kChunk - 1) / kChunk * kChunk);
  const size_t half = inv_freq_.size();
  for (int64_t pos = from; pos < to; ++pos) {
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq_[i];
      const size_t at = static_cast<size_t>(pos) * half + i;
      r.cos[at] = static_cast<float>(std::cos(static_cast<double>(angle))) * attention_scaling_;
      r.sin[at] = static_cast<float>(std::sin(static_cast<double>(angle))) * attention_scaling_;
    }
  }
  r.filled.store(to, std::memory_order_release);
}

void ApplyRope(const KernelContext& ctx, const RopeTable& table, RopeStyle style, int64_t tokens,
               const int32_t* positions, int64_t heads, float* x, int64_t ldx) {
  ApplyRope(ctx, table, style, tokens, positions, heads, nullptr, 0, x, ldx);
}

// x null: y rotated in place.
void ApplyRope(const KernelContext& ctx, const RopeTable& table, RopeStyle style, int64_t tokens,
               const int32_t* positions, int64_t heads, const float* x, int64_t ldx, float* y, int64_t ldy) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  RopeArgs args{};
  args.x = y;
  args.ldx = ldy;
  args.src = x;
  args.ld_src = ldx;
  args.heads = heads;
  args.head_dim = table.head_dim();
  args.rotary_dim = table.rotary_dim();
  args.interleaved = style == RopeStyle::kInterleaved;
  args.positions = positions;
  int64_t used = 0;
  for (int64_t t = 0; t < tokens; ++t) used = std::max<int64_t>(used, positions[t] + 1);
  table.RowsBelow(std::min(used, table.max_positions()));
  args.cos = table.rows_->cos.get();
  args.sin = table.rows_->sin.get();
  const int64_t per_token = std::max<int64_t>(1, heads * table.rotary_dim());
  ParallelRanges(ctx, tokens, std::max<int64_t>(1, 16384 / per_token), [&](int64_t begin, int64_t end, int) {
    RopeArgs piece = args;
    piece.t_begin = begin;
    piece.t_end = end;
    kernels.rope(piece);
  });
}

}  // namespace kiln::cpu
