// Ops that move data without arithmetic (Caffe semantics):
//   Concat(x...)      join along `axis`; every other dim must match.
//   Slice(x)          split along `axis` at slice_points, or into num_outputs equal parts.
//   Split(x)          num_outputs copies of x (Caffe's implicit fan-out layer).
//   Flatten(x)        collapse axes axis..end_axis into one.
//   Reshape(x)        replace axes [axis, axis+num_axes) with `shape` (0 copies the input dim,
//                     one -1 is inferred).
//   Crop(x, ref)      dims from `axis` on take ref's size, starting at `offset` (one offset for
//                     all cropped dims, or one per dim; none means 0). `dtype` ("" keeps x's)
//                     converts on the way: passes/fold_convert_into_crop.cc gives a Crop the
//                     Convert that read it, so the window is copied and converted in one pass.
//   Convert(x)        the same values in another dtype (`dtype`: f32, f16, bf16, or "" to keep
//                     x's) and memory order (`layout`: row_major, channels_last, or "" to keep
//                     x's family). Not a Caffe layer: the compiler inserts it where a plan's
//                     precision or layout differs from the graph's inputs and outputs.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferConcat(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  std::vector<int64_t> out = x.dims();
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    bool ok = t.rank() == x.rank() && t.dtype() == x.dtype();
    for (int d = 0; ok && d < x.rank(); ++d) ok = d == axis || t.dim(d) == x.dim(d);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " ", t.ToString(),
                                                     " does not match input 0 ", x.ToString(),
                                                     " outside axis ", axis));
    }
    out[axis] += t.dim(axis);
  }
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, out));
  return std::vector<TensorType>{result};
}

absl::StatusOr<std::vector<TensorType>> InferSlice(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  const auto& points = ctx.GetInts("slice_points");
  const int64_t requested = ctx.GetInt("num_outputs");
  std::vector<int64_t> sizes;
  if (points.empty()) {
    if (requested < 1) {
      return absl::InvalidArgumentError("give slice_points or num_outputs >= 1");
    }
    if (x.dim(axis) % requested != 0) {
      return absl::InvalidArgumentError(absl::StrCat("dim ", axis, " of size ", x.dim(axis),
                                                     " does not split into ", requested,
                                                     " equal parts"));
    }
    sizes.assign(requested, x.dim(axis) / requested);
  } else {
    if (requested != 0 && requested != static_cast<int64_t>(points.size()) + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          points.size(), " slice_points give ", points.size() + 1, " outputs, not ", requested));
    }
    int64_t prev = 0;
    for (int64_t p : points) {
      if (p <= prev || p >= x.dim(axis)) {
        return absl::InvalidArgumentError(absl::StrCat("slice_points ", DimsToString(points),
                                                       " must increase strictly inside (0, ",
                                                       x.dim(axis), ")"));
      }
      sizes.push_back(p - prev);
      prev = p;
    }
    sizes.push_back(x.dim(axis) - prev);
  }
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    std::vector<int64_t> dims = x.dims();
    dims[axis] = s;
    KILN_ASSIGN_OR_RETURN(TensorType t, OutputLike(x, dims));
    out.push_back(t);
  }
  return out;
}

absl::StatusOr<std::vector<TensorType>> InferSplit(const InferContext& ctx) {
  const int64_t n = ctx.GetInt("num_outputs");
  if (n < 1) return absl::InvalidArgumentError("num_outputs must be >= 1");
  KILN_ASSIGN_OR_RETURN(TensorType t, OutputLike(ctx.input(0), ctx.input(0).dims()));
  return std::vector<TensorType>(n, t);
}

absl::StatusOr<std::vector<TensorType>> InferFlatten(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int a, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  KILN_ASSIGN_OR_RETURN(int e, NormalizeAxis(ctx.GetInt("end_axis"), x.rank(), "end_axis"));
  if (e < a) return absl::InvalidArgumentError("end_axis is before axis");
  std::vector<int64_t> out(x.dims().begin(), x.dims().begin() + a);
  out.push_back(ProductOfDims(x.dims(), a, e + 1));
  out.insert(out.end(), x.dims().begin() + e + 1, x.dims().end());
  KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(x.dtype(), out));
  return std::vector<TensorType>{t};
}

absl::StatusOr<std::vector<TensorType>> InferReshape(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const auto& shape = ctx.GetInts("shape");
  const int64_t axis = ctx.GetInt("axis");
  const int64_t num_axes = ctx.GetInt("num_axes");
  const int64_t start = axis >= 0 ? axis : x.rank() + axis + 1;
  if (start < 0 || start > x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", x.rank()));
  }
  if (num_axes < -1 || (num_axes >= 0 && start + num_axes > x.rank())) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_axes ", num_axes, " from axis ", start, " exceeds rank ", x.rank()));
  }
  const int64_t end = num_axes == -1 ? x.rank() : start + num_axes;
  std::vector<int64_t> out(x.dims().begin(), x.dims().begin() + start);
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0) {
      if (start + static_cast<int64_t>(i) >= end) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape entry ", i, " is 0 but there is no input dim to copy"));
      }
      d = x.dim(static_cast<int>(start + i));
    } else if (d == -1) {
      if (inferred >= 0) return absl::InvalidArgumentError("shape has more than one -1");
      inferred = static_cast<int>(out.size());
      d = 1;
    } else if (d < -1) {
      return absl::InvalidArgumentError(absl::StrCat("shape entry ", i, " is ", d));
    }
    out.push_back(d);
  }
  out.insert(out.end(), x.dims().begin() + end, x.dims().end());
  const int64_t replaced = ProductOfDims(x.dims(), static_cast<int>(start), static_cast<int>(end));
  int64_t known = 1;
  for (size_t i = start; i < start + shape.size(); ++i) known *= out[i];
  if (inferred >= 0) {
    if (known == 0 || replaced % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot infer -1: ", replaced, " elements are not a multiple of ", known));
    }
    out[inferred] = replaced / known;
  } else if (known != replaced) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", DimsToString(shape), " holds ", known, " elements where ", replaced,
                     " are replaced (input ", DimsToString(x.dims()), ")"));
  }
  KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(x.dtype(), out));
  return std::vector<TensorType>{t};
}

absl::StatusOr<std::vector<TensorType>> InferCrop(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& ref = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  if (ref.rank() != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("reference ", DimsToString(ref.dims()),
                                                   " must have the input's rank ", x.rank()));
  }
  const auto& offsets = ctx.GetInts("offset");
  const int cropped = x.rank() - axis;
  if (offsets.size() > 1 && static_cast<int>(offsets.size()) != cropped) {
    return absl::InvalidArgumentError(absl::StrCat(offsets.size(), " offsets for ", cropped,
                                                   " cropped dims; give 0, 1 or ", cropped));
  }
  std::vector<int64_t> out = x.dims();
  for (int d = axis; d < x.rank(); ++d) {
    const int64_t off = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
    if (off < 0 || off + ref.dim(d) > x.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("dim ", d, ": offset ", off, " + size ",
                                                     ref.dim(d), " exceeds input size ", x.dim(d)));
    }
    out[d] = ref.dim(d);
  }
  KILN_ASSIGN_OR_RETURN(const TensorType like, OutputLike(x, out));
  if (ctx.GetString("dtype").empty()) return std::vector<TensorType>{like};
  KILN_ASSIGN_OR_RETURN(DataType dtype, ParseDataType(ctx.GetString("dtype")));
  if (!IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype '", ctx.GetString("dtype"), "': use f32, f16 or bf16"));
  }
  KILN_ASSIGN_OR_RETURN(TensorType t,
                        TensorType::CreateStrided(dtype, like.dims(), like.strides()));
  return std::vector<TensorType>{t};
}

absl::StatusOr<std::vector<TensorType>> InferConvert(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  DataType dtype = x.dtype();
  if (!ctx.GetString("dtype").empty()) {
    KILN_ASSIGN_OR_RETURN(dtype, ParseDataType(ctx.GetString("dtype")));
    if (!IsFloatingPoint(dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtype '", ctx.GetString("dtype"), "': use f32, f16 or bf16"));
    }
  }
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  const std::string& layout = ctx.GetString("layout");
  Layout order = x.IsChannelsLast() && (x.rank() == 4 || x.rank() == 5) ? Layout::kChannelsLast
                                                                        : Layout::kRowMajor;
  if (layout == "channels_last") {
    if (x.rank() != 4 && x.rank() != 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout channels_last needs a 4-d or 5-d input, got ", x.ToString()));
    }
    order = Layout::kChannelsLast;
  } else if (layout == "row_major") {
    order = Layout::kRowMajor;
  } else if (!layout.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout '", layout, "': use row_major, channels_last or \"\""));
  }
  KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::CreateWithLayout(dtype, x.dims(), order));
  return std::vector<TensorType>{t};
}

OpDef Def(const std::string& name, int min_inputs, int max_inputs, std::vector<AttrDef> attrs,
          InferTypesFn infer, const std::string& summary) {
  OpDef def = MakeOpDef(name, "tensor", std::move(attrs), std::move(infer), summary);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  return def;
}

}  // namespace

absl::Status RegisterTensorOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  defs.push_back(Def("Concat", 1, -1, {{"axis", AttrKind::kInt, AttrValue(int64_t{1})}},
                     InferConcat, "Join inputs along an axis."));
  defs.push_back(Def("Slice", 1, 1,
                     {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                      {"slice_points", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                      {"num_outputs", AttrKind::kInt, AttrValue(int64_t{0})}},
                     InferSlice, "Split along an axis at points or into equal parts."));
  defs.push_back(Def("Split", 1, 1, {{"num_outputs", AttrKind::kInt, AttrValue(int64_t{2})}},
                     InferSplit, "Copies of the input (fan-out)."));
  defs.push_back(Def("Flatten", 1, 1,
                     {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                      {"end_axis", AttrKind::kInt, AttrValue(int64_t{-1})}},
                     InferFlatten, "Collapse a range of axes."));
  defs.push_back(Def("Reshape", 1, 1,
                     {{"shape", AttrKind::kInts, std::nullopt},
                      {"axis", AttrKind::kInt, AttrValue(int64_t{0})},
                      {"num_axes", AttrKind::kInt, AttrValue(int64_t{-1})}},
                     InferReshape, "Caffe Reshape (0 copies a dim, -1 is inferred)."));
  OpDef crop = Def("Crop", 2, 2,
                   {{"axis", AttrKind::kInt, AttrValue(int64_t{2})},
                    {"offset", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                    {"dtype", AttrKind::kString, AttrValue(std::string())}},
                   InferCrop, "Crop to a reference's size from an axis on, at offsets.");
  crop.input_names = {"x", "reference"};
  crop.shape_only_inputs = {1};
  defs.push_back(std::move(crop));
  defs.push_back(Def("Convert", 1, 1,
                     {{"dtype", AttrKind::kString, AttrValue(std::string())},
                      {"layout", AttrKind::kString, AttrValue(std::string())}},
                     InferConvert, "The same values in another dtype and/or memory order."));
  for (OpDef& def : defs) KILN_RETURN_IF_ERROR(registry.Register(std::move(def)));
  return absl::OkStatus();
}

}  // namespace kiln
