// KILN_HD marks small inline functions that CUDA kernels and host code share; KILN_UNROLL asks
// nvcc to unroll a loop (and is nothing for the host compiler).
#ifndef KILN_DNN_HOST_DEVICE_H_
#define KILN_DNN_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#define KILN_UNROLL _Pragma("unroll")
#else
#define KILN_HD inline
#define KILN_UNROLL
#endif

#endif  // KILN_DNN_HOST_DEVICE_H_
