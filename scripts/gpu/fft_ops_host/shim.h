// Lets kernels/fft_ops.cu compile as host C++ (scripts/gpu/fft_ops_host/run.sh).
#include <cmath>
struct float2 { float x, y; };
struct double2 { double x, y; };
static inline double2 make_double2(double a, double b) { return {a, b}; }
static inline float2 make_float2(float a, float b) { return {a, b}; }
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
