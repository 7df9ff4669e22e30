// JPEG through libjpeg-turbo. libjpeg's default error handler calls exit();
// ours longjmps back to the decode call instead. The longjmp crosses only
// libjpeg's C frames, and everything the decode call changes after setjmp
// lives behind pointers (JpegJob), so no C++ destructor is skipped and no
// local is left indeterminate.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "vision/exif_orientation.h"
#include "vision/image_file.h"

namespace kiln {
namespace {

// A progressive file may hold any number of scans, each a pass over the
// whole image; a few hundred bytes could otherwise keep the decoder busy
// for minutes.
constexpr int kMaxScans = 256;

struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated = false;
};

void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are not printed; a premature end of the data (a truncated file,
// which libjpeg would pad with gray) is remembered and reported as an error.
void OnMessage(j_common_ptr cinfo, int msg_level) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (msg_level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) err->truncated = true;
}

void OnProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

struct JpegJob {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  jpeg_progress_mgr progress;
  Image image;
  std::vector<uint8_t> row;
  std::string error;  // set when the data is refused before the longjmp
  int orientation = 1;  // EXIF
};

// The messages are built outside RunDecode: no std::string may live in the
// frame that calls setjmp (its locals are indeterminate after a longjmp).
[[gnu::noinline]] void RefuseSize(JpegJob* job, uint64_t width, uint64_t height, int64_t max_pixels) {
  job->error = "JPEG image of " + std::to_string(width) + "x" + std::to_string(height) +
               " pixels is larger than the limit of " + std::to_string(max_pixels) + " pixels";
}

[[gnu::noinline]] void RefuseComponents(JpegJob* job, int channels) {
  job->error = "JPEG decoder produced " + std::to_string(channels) + " components";
}

[[gnu::noinline]] void Refuse(JpegJob* job, const char* message) { job->error = message; }

// Returns false with job->err.message or job->error set on failure.
bool RunDecode(JpegJob* job, const uint8_t* data, size_t size, int64_t max_pixels) {
  jpeg_decompress_struct* cinfo = &job->cinfo;
  if (setjmp(job->err.jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(cinfo, TRUE);
  for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1) {
      const int o = ExifOrientation(m->data, m->data_length);
      if (o != 1) job->orientation = o;
    }
  }
  if (static_cast<int64_t>(cinfo->image_width) * cinfo->image_height > max_pixels) {
    RefuseSize(job, cinfo->image_width, cinfo->image_height, max_pixels);
    return false;
  }
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  const int channels = cinfo->output_components;
  if (channels != (cmyk ? 4 : 3)) {
    RefuseComponents(job, channels);
    return false;
  }
  job->image = Image(static_cast<int>(cinfo->output_width), static_cast<int>(cinfo->output_height));
  job->row.resize(static_cast<size_t>(cinfo->output_width) * channels);
  while (cinfo->output_scanline < cinfo->output_height) {
    const int y = static_cast<int>(cinfo->output_scanline);
    JSAMPROW rows[1] = {job->row.data()};
    if (jpeg_read_scanlines(cinfo, rows, 1) != 1) {
      Refuse(job, "JPEG data ended early");
      return false;
    }
    uint8_t* out = job->image.pixel(0, y);
    if (!cmyk) {
      std::memcpy(out, job->row.data(), job->row.size());
      continue;
    }
    // Adobe's CMYK JPEGs (the common kind) store inverted values: the
    // decoded bytes are 255 - C etc., so R = (255 - C)(255 - K) / 255.
    for (size_t x = 0; x < cinfo->output_width; ++x) {
      const uint8_t* p = &job->row[x * 4];
      const bool inverted = cinfo->saw_Adobe_marker;
      const int c = inverted ? p[0] : 255 - p[0], m = inverted ? p[1] : 255 - p[1];
      const int yy = inverted ? p[2] : 255 - p[2], k = inverted ? p[3] : 255 - p[3];
      out[x * 3 + 0] = static_cast<uint8_t>(c * k / 255);
      out[x * 3 + 1] = static_cast<uint8_t>(m * k / 255);
      out[x * 3 + 2] = static_cast<uint8_t>(yy * k / 255);
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

struct JpegWriteJob {
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

bool RunEncode(JpegWriteJob* job, const Image& image, int quality) {
  jpeg_compress_struct* cinfo = &job->cinfo;
  if (setjmp(job->err.jump)) return false;
  jpeg_mem_dest(cinfo, &job->buffer, &job->size);
  cinfo->image_width = static_cast<JDIMENSION>(image.width);
  cinfo->image_height = static_cast<JDIMENSION>(image.height);
  cinfo->input_components = 3;
  cinfo->in_color_space = JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW rows[1] = {const_cast<JSAMPLE*>(image.pixel(0, static_cast<int>(cinfo->next_scanline)))};
    jpeg_write_scanlines(cinfo, rows, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

}  // namespace

Expected<Image> DecodeJpeg(const uint8_t* data, size_t size, const ImageDecodeLimits& limits) {
  if (size < 4) return Corrupt("JPEG data of {} bytes is too short", size);
  auto job = std::make_unique<JpegJob>();
  job->cinfo.err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = OnError;
  job->err.pub.emit_message = OnMessage;
  job->err.message[0] = '\0';
  jpeg_create_decompress(&job->cinfo);
  job->progress.progress_monitor = OnProgress;
  job->cinfo.progress = &job->progress;
  const bool ok = RunDecode(job.get(), data, size, limits.max_pixels);
  jpeg_destroy_decompress(&job->cinfo);
  if (!ok) {
    if (!job->error.empty()) return Corrupt("{}", job->error);
    return Corrupt("not a readable JPEG image: {}", job->err.message);
  }
  if (job->err.truncated) return Corrupt("JPEG data is truncated (the file ends before the image does)");
  if (job->orientation != 1) return ApplyExifOrientation(job->image, job->orientation);
  return std::move(job->image);
}

Expected<std::vector<uint8_t>> EncodeJpeg(const Image& image, int quality) {
  if (image.empty()) return InvalidArgument("cannot encode an empty image as JPEG");
  auto job = std::make_unique<JpegWriteJob>();
  job->cinfo.err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = OnError;
  job->err.pub.emit_message = OnMessage;
  jpeg_create_compress(&job->cinfo);
  const bool ok = RunEncode(job.get(), image, quality);
  jpeg_destroy_compress(&job->cinfo);
  std::vector<uint8_t> bytes;
  if (ok) bytes.assign(job->buffer, job->buffer + job->size);
  std::free(job->buffer);
  if (!ok) return Internal("JPEG encoding failed: {}", job->err.message);
  return bytes;
}

}  // namespace kiln
