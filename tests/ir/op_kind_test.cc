// Every op Kiln registers has its own OpKind, and kinds and names map both ways.
#include "ir/op_kind.h"

#include <set>

#include "gtest/gtest.h"
#include "ops/all_ops.h"

namespace kiln {
namespace {

TEST(OpKindTest, EveryRegisteredOpHasItsOwnKind) {
  std::set<OpKind> seen;
  const std::vector<const OpDef*> defs = DefaultOpRegistry().All();
  ASSERT_GT(defs.size(), 50u);
  for (const OpDef* def : defs) {
    const std::string& name = def->name;
    EXPECT_NE(def->kind, OpKind::kCustom) << name << " is missing from KILN_OP_KINDS";
    EXPECT_EQ(OpKindName(def->kind), name);
    EXPECT_TRUE(seen.insert(def->kind).second) << name << " shares its kind";
  }
}

TEST(OpKindTest, UnknownNamesAreCustom) {
  EXPECT_EQ(OpKindFromName("NoSuchOp"), OpKind::kCustom);
  EXPECT_EQ(OpKindFromName(""), OpKind::kCustom);
  EXPECT_EQ(OpKindFromName("convolution"), OpKind::kCustom);  // names are case-sensitive
  EXPECT_EQ(OpKindFromName("Convolution"), OpKind::kConvolution);
  EXPECT_EQ(OpKindName(OpKind::kCustom), "custom");
}

}  // namespace
}  // namespace kiln
