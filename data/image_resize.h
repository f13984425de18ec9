// Bilinear resizing of 8-bit images, matching the geometry of OpenCV's cv::resize with
// INTER_LINEAR, which Caffe's ReadImageToCVMat uses for new_height/new_width and
// convert_imageset's --resize_height/--resize_width.
#ifndef KILN_DATA_IMAGE_RESIZE_H_
#define KILN_DATA_IMAGE_RESIZE_H_

#include "absl/status/statusor.h"
#include "data/image_decoder.h"

namespace kiln {

// Resizes `image` to height x width (every channel alike). Output pixel (y, x) samples the source
// at the pixel-center position
//     sy = (y + 0.5) * (in_height / height) - 0.5,   sx likewise,
// clamped to [0, in_height - 1] and [0, in_width - 1], blending the 2x2 neighbours by the
// fractional parts:
//     v = (1-fy)(1-fx) p[y0][x0] + (1-fy) fx p[y0][x0+1] + fy (1-fx) p[y0+1][x0] + fy fx
//     p[y0+1][x0+1]
// (the +1 neighbour clamped to the last row/column), then rounded to the nearest integer,
// halves up. The same formula serves upscaling and downscaling: like OpenCV's INTER_LINEAR,
// a downscale does not average over the pixels between samples (no antialiasing).
//
// OpenCV computes the blend in 11-bit fixed point, so an OpenCV-resized pixel can differ from
// this exact blend by 1 where the exact value lies near a half.
//
// InvalidArgument when the source is empty or the target size is not positive or exceeds
// kMaxImageBytes.
absl::StatusOr<Image> ResizeBilinear(const Image& image, int height, int width);

}  // namespace kiln

#endif  // KILN_DATA_IMAGE_RESIZE_H_
