// Direct-loop reference convolutions (see conv_reference.h).
#include "backend/cpu/tensor_kernels/conv_reference.h"

#include <algorithm>

namespace kiln::cpu {

void ReferenceConv(const Window3& g, const float* x, const float* w, const float* bias, const float* residual,
                   const FusedEpilogue& epilogue, float* y) {
  const int64_t cg = g.GroupIn(), mg = g.GroupOut();
  int64_t yi = 0;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t m = 0; m < g.out_channels; ++m) {
      const int64_t grp = m / mg;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++yi) {
            float acc = bias != nullptr ? bias[m] : 0.0f;
            for (int64_t c = 0; c < cg; ++c) {
              const float* xc = x + ((n * g.in_channels) + grp * cg + c) * g.InPixels();
              const float* wc = w + (m * cg + c) * g.Taps();
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                  const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const int64_t iw = ow * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc += xc[(id * g.in[1] + ih) * g.in[2] + iw] *
                           wc[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
                  }
                }
              }
            }
            y[yi] = ApplyEpilogue(epilogue, acc, residual, yi);
          }
        }
      }
    }
  }
}

void ReferenceConvTranspose(const Window3& g, const float* x, const float* w, const float* bias, float* y,
                            int64_t begin, int64_t end) {
  const int64_t cg = g.GroupIn(), mg = g.GroupOut();
  const int64_t out_pixels = g.OutPixels();
  if (end < 0) end = g.batch * g.out_channels;
  // One output plane at a time, so that planes can go to different threads.
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / g.out_channels, m = plane % g.out_channels;
    const int64_t grp = m / mg, mo = m % mg;
    float* ym = y + plane * out_pixels;
    std::fill(ym, ym + out_pixels, bias != nullptr ? bias[m] : 0.0f);
    for (int64_t c = grp * cg; c < (grp + 1) * cg; ++c) {
      const float* xc = x + (n * g.in_channels + c) * g.InPixels();
      const float* wk = w + (c * mg + mo) * g.Taps();
      for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
        for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
          for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
            const float wv = wk[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
            for (int64_t id = 0; id < g.in[0]; ++id) {
              const int64_t od = id * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
              if (od < 0 || od >= g.out[0]) continue;
              for (int64_t ih = 0; ih < g.in[1]; ++ih) {
                const int64_t oh = ih * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
                if (oh < 0 || oh >= g.out[1]) continue;
                const float* xr = xc + (id * g.in[1] + ih) * g.in[2];
                float* yr = ym + (od * g.out[1] + oh) * g.out[2];
                for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                  const int64_t ow = iw * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                  if (ow < 0 || ow >= g.out[2]) continue;
                  yr[ow] += xr[iw] * wv;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace kiln::cpu
