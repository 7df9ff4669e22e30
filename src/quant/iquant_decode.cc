#include "quant/iquant_decode.h"

#include <cstring>

#include "core/half.h"
#include "quant/iquant_grids.h"

namespace kiln {
namespace {

template <typename Block>
Block Load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

uint32_t U32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint16_t U16At(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Writes n (4 or 8) magnitudes of a grid entry with signs (bit j: weight j
// negative) into w.
void PutGroup(uint64_t entry, uint8_t signs, int n, int8_t* w) {
  for (int j = 0; j < n; ++j) {
    const int negative = -((signs >> j) & 1);  // 0 or -1: (m ^ -1) + 1 = -m
    w[j] = static_cast<int8_t>((GridByte(entry, j) ^ negative) - negative);
  }
}

// ls in the top 4 bits, the signs of 4 groups of 8 in 7 bits each below;
// the scale goes to both pieces of 16 of the sub-block.
void SignsAndScale(uint32_t packed, uint8_t signs[4], int8_t* scales) {
  for (int l = 0; l < 4; ++l) signs[l] = SignsFrom7Bits(packed >> (7 * l));
  scales[0] = scales[1] = static_cast<int8_t>(2 * (packed >> 28) + 1);
}

// IQ2_XS and IQ2_S: a nibble per piece of 16, the low one first.
void ScalesOf16(const uint8_t scales[8], int8_t* out) {
  for (int p = 0; p < 16; ++p) out[p] = static_cast<int8_t>(2 * ((scales[p / 2] >> (4 * (p % 2))) & 15) + 1);
}

void DecodeIQ2_XXS(const uint8_t* p, IQuantBlock* out) {
  const auto b = Load<BlockIQ2_XXS>(p);
  out->unit = F16ToF32(b.d) * 0.125f;
  for (int j = 0; j < 8; ++j) {
    uint8_t signs[4];
    SignsAndScale(U32At(b.qs + 8 * j + 4), signs, out->scale + 2 * j);
    for (int l = 0; l < 4; ++l) PutGroup(kIQ2XXSGrid[b.qs[8 * j + l]], signs[l], 8, out->w + 32 * j + 8 * l);
  }
}

void DecodeIQ2_XS(const uint8_t* p, IQuantBlock* out) {
  const auto b = Load<BlockIQ2_XS>(p);
  out->unit = F16ToF32(b.d) * 0.125f;
  ScalesOf16(b.scales, out->scale);
  for (int g = 0; g < 32; ++g) {
    const uint16_t q = U16At(b.qs + 2 * g);
    PutGroup(kIQ2XSGrid[q & 511], SignsFrom7Bits(q >> 9), 8, out->w + 8 * g);
  }
}

void DecodeIQ2_S(const uint8_t* p, IQuantBlock* out) {
  const auto b = Load<BlockIQ2_S>(p);
  out->unit = F16ToF32(b.d) * 0.125f;
  ScalesOf16(b.scales, out->scale);
  for (int g = 0; g < 32; ++g) {
    const int index = b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
    PutGroup(kIQ2SGrid[index], b.signs[g], 8, out->w + 8 * g);
  }
}

void DecodeIQ3_XXS(const uint8_t* p, IQuantBlock* out) {
  const auto b = Load<BlockIQ3_XXS>(p);
  out->unit = F16ToF32(b.d) * 0.25f;
  for (int j = 0; j < 8; ++j) {
    uint8_t signs[4];
    SignsAndScale(U32At(b.scales_signs + 4 * j), signs, out->scale + 2 * j);
    for (int l = 0; l < 4; ++l) {
      int8_t* w = out->w + 32 * j + 8 * l;
      PutGroup(kIQ3XXSGrid[b.qs[8 * j + 2 * l]], signs[l], 4, w);
      PutGroup(kIQ3XXSGrid[b.qs[8 * j + 2 * l + 1]], static_cast<uint8_t>(signs[l] >> 4), 4, w + 4);
    }
  }
}

void DecodeIQ3_S(const uint8_t* p, IQuantBlock* out) {
  const auto b = Load<BlockIQ3_S>(p);
  out->unit = F16ToF32(b.d);
  for (int p = 0; p < 16; ++p) out->scale[p] = static_cast<int8_t>(2 * ((b.scales[p / 4] >> (4 * (p / 2 % 2))) & 15) + 1);
  for (int h = 0; h < 64; ++h) {
    const int index = b.qs[h] | (((b.qh[h / 8] >> (h % 8)) & 1) << 8);
    const uint8_t signs = static_cast<uint8_t>(b.signs[h / 2] >> (4 * (h % 2)));
    PutGroup(kIQ3SGrid[index], signs, 4, out->w + 4 * h);
  }
}

}  // namespace

bool IsGridIQuant(DType dtype) {
  return dtype == DType::kIQ2_XXS || dtype == DType::kIQ2_XS || dtype == DType::kIQ2_S ||
         dtype == DType::kIQ3_XXS || dtype == DType::kIQ3_S;
}

void DecodeIQuantBlock(DType dtype, const uint8_t* block, IQuantBlock* out) {
  switch (dtype) {
    case DType::kIQ2_XXS: return DecodeIQ2_XXS(block, out);
    case DType::kIQ2_XS: return DecodeIQ2_XS(block, out);
    case DType::kIQ2_S: return DecodeIQ2_S(block, out);
    case DType::kIQ3_XXS: return DecodeIQ3_XXS(block, out);
    case DType::kIQ3_S: return DecodeIQ3_S(block, out);
    default: return;
  }
}

}  // namespace kiln
