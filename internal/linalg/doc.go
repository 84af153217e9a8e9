// Package linalg is gpreduce's compute core: deterministic, fast double-precision BLAS-3
// (Gemm, Syrk, Trsm), a blocked Cholesky factorisation (Potrf) with solves and the inverse
// on top of it, and a vectorised exponential for kernel blocks.
//
// The routines take the argument conventions of gonum's blas64 and lapack64 (blas64.General,
// blas64.Symmetric, blas64.Triangular; row-major storage), so a call site changes from
// blas64.Syrk(...) to linalg.Syrk(...) and nothing else.
//
// # Determinism
//
// Every routine computes each output element by one fixed sequence of IEEE-754 operations
// that depends only on the problem's dimensions and the package's fixed blocking constants:
//
//   - matrix products are blocked as in Goto and van de Geijn, "Anatomy of high-performance
//     matrix multiplication", ACM TOMS 34(3), 2008: the inner dimension is cut into
//     panels of KC = 256; within a panel each product element is accumulated from zero by
//     fused multiply-adds in increasing k, and the panel sum is added into C by one more
//     fused multiply-add, C = fma(alpha, acc, C), panels in increasing order;
//   - the micro-kernel is AVX2 + FMA assembly on amd64 when the CPU has both (checked at run
//     time with golang.org/x/sys/cpu), and otherwise a pure-Go kernel that performs the same
//     fused multiply-adds (math.FMA) in the same order, so both give identical bits;
//   - work is split over goroutines by output tile, by pieces of the packing (copies) and by
//     independent rows of a triangular substitution only: each output element is computed by
//     exactly one goroutine with the same operations whichever it is, so the bits do not
//     depend on GOMAXPROCS or on the number of goroutines;
//   - the exponential is a fixed polynomial evaluated by fused multiply-adds, identical in
//     the assembly and the Go version.
//
// Two machines therefore give the same bits for the same inputs whenever they run this
// package's code (any GOOS/GOARCH, any core count, with or without AVX2/FMA): the only
// platform operations used are IEEE-754 add, multiply, divide, square root and fused
// multiply-add, which are correctly rounded everywhere Go runs. The results differ in the
// last bits from gonum's (different summation order), never by more than the rounding error
// bound of the respective algorithm.
package linalg
