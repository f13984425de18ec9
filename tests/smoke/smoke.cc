#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include <cblas.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "tests/smoke/k.h"
TEST(S, A){ absl::StatusOr<int> s = absl::InvalidArgumentError(absl::StrCat("x",1)); EXPECT_FALSE(s.ok());
 float a[4]={1,2,3,4}, b[4]={1,0,0,1}, c[4]; cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,2,2,2,1,a,2,b,2,0,c,2); EXPECT_EQ(c[3],4);
 int n=0; cudaError_t e=cudaGetDeviceCount(&n); printf("cuda: %s\n", cudaGetErrorString(e)); cublasHandle_t h; printf("cublas %d\n",(int)cublasCreate(&h));}
