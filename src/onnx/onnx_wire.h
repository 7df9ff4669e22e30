// The protobuf wire format as kiln reads it: a bounds-checked cursor over
// one message's bytes (internal to the onnx area: the decoder of onnx.proto's
// messages and the artifact's graph rewriting share it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace kiln::onnx_proto {

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

// What all the cursors of one decoding share: the first failure (for the
// message) and the count of messages and strings decoded, which is bounded
// because each costs far more memory than its few bytes on the wire.
struct DecodeState {
  std::string error;
  int64_t items = 0;
  int64_t max_items = 0;
};

// A cursor over one message's bytes. Every read checks the bounds; the first
// failure is remembered and makes all later reads fail.
class Wire {
 public:
  Wire(const uint8_t* p, const uint8_t* end, const uint8_t* origin, DecodeState* state, int depth_left)
      : p_(p), end_(end), origin_(origin), state_(state), depth_left_(depth_left) {}

  bool AtEnd() const { return p_ >= end_; }
  // Where the next read starts (a field's bytes run from one to the next).
  const uint8_t* position() const { return p_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool ok() const { return state_->error.empty(); }

  bool Fail(const char* what) {
    if (state_->error.empty()) state_->error = fmt::format("{} at byte {}", what, p_ - origin_);
    return false;
  }

  // Counts one more message or string against the limit.
  bool Item() {
    if (++state_->items <= state_->max_items) return true;
    if (state_->error.empty()) {
      state_->error = fmt::format("more than {} messages and strings, the limit", state_->max_items);
    }
    return false;
  }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ >= end_) return Fail("a number runs past the end");
      uint8_t b = *p_++;
      if (shift == 63 && b > 1) return Fail("a number longer than 64 bits");
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = result;
        return true;
      }
    }
    return Fail("a number longer than 10 bytes");
  }

  bool Fixed(void* out, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return Fail("a fixed-size value runs past the end");
    std::memcpy(out, p_, n);  // little-endian on the wire and on the host
    p_ += n;
    return true;
  }

  bool Tag(uint32_t* field, int* wire_type) {
    uint64_t tag = 0;
    if (!Varint(&tag)) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    if (*field == 0 || tag >> 3 > 0x1fffffff) return Fail("an invalid field number");
    return true;
  }

  bool Len(const uint8_t** begin, size_t* n) {
    uint64_t len = 0;
    if (!Varint(&len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) return Fail("a length runs past the end");
    *begin = p_;
    *n = static_cast<size_t>(len);
    p_ += len;
    return true;
  }

  bool Skip(int wire_type) {
    uint64_t v = 0;
    const uint8_t* b = nullptr;
    size_t n = 0;
    switch (wire_type) {
      case kVarint: return Varint(&v);
      case kFixed64: return Fixed(&v, 8);
      case kFixed32: return Fixed(&v, 4);
      case kLen: return Len(&b, &n);
      default: return Fail("an unknown wire type");
    }
  }

  // A nested message's cursor, one level deeper.
  bool Sub(int wire_type, Wire* sub) {
    if (wire_type != kLen) return Fail("a message field with the wrong wire type");
    if (depth_left_ <= 0) return Fail("messages nested too deep");
    if (!Item()) return false;
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    *sub = Wire(b, b + n, origin_, state_, depth_left_ - 1);
    return true;
  }

  bool String(int wire_type, std::string* s) {
    std::string_view v;
    if (!View(wire_type, &v)) return false;
    s->assign(v.data(), v.size());
    return true;
  }

  bool View(int wire_type, std::string_view* v) {
    if (wire_type != kLen) return Fail("a string field with the wrong wire type");
    if (!Item()) return false;
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    *v = std::string_view(reinterpret_cast<const char*>(b), n);
    return true;
  }

  bool Int(int wire_type, int64_t* v) {
    if (wire_type != kVarint) return Fail("an integer field with the wrong wire type");
    uint64_t u = 0;
    if (!Varint(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }

  bool Int32(int wire_type, int32_t* v) {
    int64_t w = 0;
    if (!Int(wire_type, &w)) return false;
    *v = static_cast<int32_t>(w);
    return true;
  }

  bool Float(int wire_type, float* v) {
    if (wire_type != kFixed32) return Fail("a float field with the wrong wire type");
    return Fixed(v, 4);
  }

  // A repeated varint field, packed or not.
  template <typename T>
  bool RepeatedVarint(int wire_type, std::vector<T>* out) {
    if (wire_type == kVarint) {
      uint64_t u = 0;
      if (!Varint(&u)) return false;
      out->push_back(static_cast<T>(u));
      return true;
    }
    if (wire_type != kLen) return Fail("a repeated integer field with the wrong wire type");
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    Wire packed(b, b + n, origin_, state_, depth_left_);
    while (!packed.AtEnd()) {
      uint64_t u = 0;
      if (!packed.Varint(&u)) return false;
      out->push_back(static_cast<T>(u));
    }
    return true;
  }

  // A repeated fixed-size field (float, double), packed or not.
  template <typename T>
  bool RepeatedFixed(int wire_type, std::vector<T>* out) {
    constexpr int kExpected = sizeof(T) == 4 ? kFixed32 : kFixed64;
    if (wire_type == kExpected) {
      T v{};
      if (!Fixed(&v, sizeof(T))) return false;
      out->push_back(v);
      return true;
    }
    if (wire_type != kLen) return Fail("a repeated floating-point field with the wrong wire type");
    const uint8_t* b = nullptr;
    size_t n = 0;
    if (!Len(&b, &n)) return false;
    if (n % sizeof(T) != 0) return Fail("a packed floating-point field of a partial value");
    size_t old = out->size();
    out->resize(old + n / sizeof(T));
    if (n > 0) std::memcpy(out->data() + old, b, n);
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* origin_;
  DecodeState* state_;
  int depth_left_;
};

}  // namespace kiln::onnx_proto
