#include "tests/smoke/k.h"
__global__ void K(float* p, int n){int i=threadIdx.x; if(i<n)p[i]=1;}
int LaunchK(float* p, int n){K<<<1,32>>>(p,n); return (int)cudaGetLastError();}
