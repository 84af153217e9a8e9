#include "textflag.h"

// One step of the 6x8 micro-kernel: row p of the B panel in Y0, Y1, the six A values
// broadcast in turn, accumulators Y4..Y15 (row i in Y(4+2i), Y(5+2i)).
// VFMADD231PD x, y, z computes z = y*x + z with one rounding, as math.FMA(y, x, z).
#define STEP(aoff, boff) \
	VMOVUPD boff(DI), Y0 \
	VMOVUPD boff+32(DI), Y1 \
	VBROADCASTSD aoff(SI), Y2 \
	VBROADCASTSD aoff+8(SI), Y3 \
	VFMADD231PD Y0, Y2, Y4 \
	VFMADD231PD Y1, Y2, Y5 \
	VFMADD231PD Y0, Y3, Y6 \
	VFMADD231PD Y1, Y3, Y7 \
	VBROADCASTSD aoff+16(SI), Y2 \
	VBROADCASTSD aoff+24(SI), Y3 \
	VFMADD231PD Y0, Y2, Y8 \
	VFMADD231PD Y1, Y2, Y9 \
	VFMADD231PD Y0, Y3, Y10 \
	VFMADD231PD Y1, Y3, Y11 \
	VBROADCASTSD aoff+32(SI), Y2 \
	VBROADCASTSD aoff+40(SI), Y3 \
	VFMADD231PD Y0, Y2, Y12 \
	VFMADD231PD Y1, Y2, Y13 \
	VFMADD231PD Y0, Y3, Y14 \
	VFMADD231PD Y1, Y3, Y15

// C row i += alpha * acc row i, by one fused multiply-add per element.
#define STORE(lo, hi) \
	VMOVUPD (DX), Y1 \
	VMOVUPD 32(DX), Y2 \
	VFMADD231PD lo, Y0, Y1 \
	VFMADD231PD hi, Y0, Y2 \
	VMOVUPD Y1, (DX) \
	VMOVUPD Y2, 32(DX) \
	ADDQ R8, DX

// Zero the twelve accumulators.
#define ZEROACC \
	VXORPD Y4, Y4, Y4 \
	VXORPD Y5, Y5, Y5 \
	VXORPD Y6, Y6, Y6 \
	VXORPD Y7, Y7, Y7 \
	VXORPD Y8, Y8, Y8 \
	VXORPD Y9, Y9, Y9 \
	VXORPD Y10, Y10, Y10 \
	VXORPD Y11, Y11, Y11 \
	VXORPD Y12, Y12, Y12 \
	VXORPD Y13, Y13, Y13 \
	VXORPD Y14, Y14, Y14 \
	VXORPD Y15, Y15, Y15

// C += alpha * acc for the six rows (alpha broadcast in Y0, C at DX, row stride R8).
#define STOREALL \
	STORE(Y4, Y5) \
	STORE(Y6, Y7) \
	STORE(Y8, Y9) \
	STORE(Y10, Y11) \
	STORE(Y12, Y13) \
	STORE(Y14, Y15)

// func kernelAVX2(k int, a, b, c []float64, ldc int, alpha float64)
TEXT ·kernelAVX2(SB), NOSPLIT, $0-96
	MOVQ k+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ b_base+32(FP), DI
	MOVQ c_base+56(FP), DX
	MOVQ ldc+80(FP), R8
	SHLQ $3, R8
	ZEROACC

loop4:
	CMPQ CX, $4
	JLT  loop1
	PREFETCHT0 384(SI)
	STEP(0, 0)
	STEP(48, 64)
	PREFETCHT0 512(DI)
	STEP(96, 128)
	STEP(144, 192)
	ADDQ $192, SI
	ADDQ $256, DI
	SUBQ $4, CX
	JMP  loop4

loop1:
	TESTQ CX, CX
	JE    done
	STEP(0, 0)
	ADDQ $48, SI
	ADDQ $64, DI
	DECQ CX
	JMP  loop1

done:
	VBROADCASTSD alpha+88(FP), Y0
	STOREALL
	VZEROUPPER
	RET

// func axpyNegAVX2(t float64, x, y []float64)
// y[j] = fma(-t, x[j], y[j]) for j < len(y), as math.FMA(-t, x[j], y[j]).
TEXT ·axpyNegAVX2(SB), NOSPLIT, $0-56
	MOVSD t+0(FP), X0
	MOVQ  $0x8000000000000000, AX
	MOVQ  AX, X1
	XORPD X1, X0
	VBROADCASTSD X0, Y0
	MOVQ x_base+8(FP), SI
	MOVQ y_base+32(FP), DI
	MOVQ y_len+40(FP), CX

axpy16:
	CMPQ CX, $16
	JLT  axpy4
	VMOVUPD (DI), Y1
	VMOVUPD 32(DI), Y2
	VMOVUPD 64(DI), Y3
	VMOVUPD 96(DI), Y4
	VFMADD231PD (SI), Y0, Y1
	VFMADD231PD 32(SI), Y0, Y2
	VFMADD231PD 64(SI), Y0, Y3
	VFMADD231PD 96(SI), Y0, Y4
	VMOVUPD Y1, (DI)
	VMOVUPD Y2, 32(DI)
	VMOVUPD Y3, 64(DI)
	VMOVUPD Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $16, CX
	JMP  axpy16

axpy4:
	CMPQ CX, $4
	JLT  axpy1
	VMOVUPD (DI), Y1
	VFMADD231PD (SI), Y0, Y1
	VMOVUPD Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $4, CX
	JMP  axpy4

axpy1:
	TESTQ CX, CX
	JE    axpydone
	VMOVSD (DI), X1
	VFMADD231SD (SI), X0, X1
	VMOVSD X1, (DI)
	ADDQ $8, SI
	ADDQ $8, DI
	DECQ CX
	JMP  axpy1

axpydone:
	VZEROUPPER
	RET

// The end of the exponential for one vector: 2^k applied as two exact powers of two, then
// the range and NaN cases. x in XV, kf = round(x log2 e) in KF, the polynomial in P; uses
// Y3, Y5, Y6, Y7 (and Y12, Y13, Y15, R9 as set up by expAVX2); stores P at OFF(DI).
#define EXPFINISH(XV, KF, P, OFF) \
	VCVTPD2DQY KF, X5 \
	VPSRAD  $1, X5, X6 \
	VPSUBD  X6, X5, X7 \
	VPMOVSXDQ X6, Y6 \
	VPMOVSXDQ X7, Y7 \
	VPADDQ  Y15, Y6, Y6 \
	VPADDQ  Y15, Y7, Y7 \
	VPSLLQ  $52, Y6, Y6 \
	VPSLLQ  $52, Y7, Y7 \
	VMULPD  Y6, P, P \
	VMULPD  Y7, P, P \
	VBROADCASTSD 40(R9), Y3 \
	VCMPPD  $0x1e, Y12, XV, Y5 \
	VBLENDVPD Y5, Y3, P, P \
	VXORPD  Y3, Y3, Y3 \
	VCMPPD  $0x11, Y13, XV, Y5 \
	VBLENDVPD Y5, Y3, P, P \
	VCMPPD  $3, XV, XV, Y5 \
	VBLENDVPD Y5, XV, P, P \
	VMOVUPD P, OFF(DI)

// One Horner step for two vectors: P = fma(P, R, c) with c the 4-wide constant at OFF(R10).
#define HORNER2(OFF) \
	VFMADD213PD OFF(R10), Y1, Y4 \
	VFMADD213PD OFF(R10), Y9, Y11

// func expAVX2(dst, x []float64, table, table4 *float64)
// dst[i] = exp(x[i]) for i < len(dst) &^ 3, exactly as expGo (exp.go) lane by lane. table is
// expTable; table4 is expTable4 (ln 2 high, low and the Taylor coefficients, each four times),
// read as memory operands by the eight-wide loop, which runs two independent vectors.
TEXT ·expAVX2(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ table+48(FP), R9
	MOVQ table4+56(FP), R10
	VBROADCASTSD 24(R9), Y12 // hi
	VBROADCASTSD 32(R9), Y13 // lo
	VBROADCASTSD 0(R9), Y14  // log2 e
	VPBROADCASTQ 48(R9), Y15 // 1023

exp8loop:
	CMPQ CX, $8
	JLT  exploop
	VMOVUPD (SI), Y0
	VMOVUPD 32(SI), Y8
	VMINPD  Y12, Y0, Y1
	VMAXPD  Y13, Y1, Y1
	VMINPD  Y12, Y8, Y9
	VMAXPD  Y13, Y9, Y9
	VMULPD  Y14, Y1, Y2
	VROUNDPD $0, Y2, Y2
	VMULPD  Y14, Y9, Y10
	VROUNDPD $0, Y10, Y10
	VFNMADD231PD 0(R10), Y2, Y1
	VFNMADD231PD 0(R10), Y10, Y9
	VFNMADD231PD 32(R10), Y2, Y1
	VFNMADD231PD 32(R10), Y10, Y9
	VMOVUPD 64(R10), Y4
	VMOVUPD 64(R10), Y11
	HORNER2(96)
	HORNER2(128)
	HORNER2(160)
	HORNER2(192)
	HORNER2(224)
	HORNER2(256)
	HORNER2(288)
	HORNER2(320)
	HORNER2(352)
	HORNER2(384)
	HORNER2(416)
	HORNER2(448)
	HORNER2(480)
	EXPFINISH(Y0, Y2, Y4, 0)
	EXPFINISH(Y8, Y10, Y11, 32)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	JMP  exp8loop

exploop:
	CMPQ CX, $4
	JLT  expdone
	VMOVUPD (SI), Y0             // x
	VMINPD  Y12, Y0, Y1
	VMAXPD  Y13, Y1, Y1          // x clamped to [lo, hi]
	VMULPD  Y14, Y1, Y2
	VROUNDPD $0, Y2, Y2          // kf = round-to-even(x log2 e)
	VFNMADD231PD 0(R10), Y2, Y1  // r = fma(-kf, ln2hi, x)
	VFNMADD231PD 32(R10), Y2, Y1 // r = fma(-kf, ln2lo, r)
	VMOVUPD 64(R10), Y4          // p = c13
	VFMADD213PD 96(R10), Y1, Y4  // p = fma(p, r, c12)
	VFMADD213PD 128(R10), Y1, Y4
	VFMADD213PD 160(R10), Y1, Y4
	VFMADD213PD 192(R10), Y1, Y4
	VFMADD213PD 224(R10), Y1, Y4
	VFMADD213PD 256(R10), Y1, Y4
	VFMADD213PD 288(R10), Y1, Y4
	VFMADD213PD 320(R10), Y1, Y4
	VFMADD213PD 352(R10), Y1, Y4
	VFMADD213PD 384(R10), Y1, Y4
	VFMADD213PD 416(R10), Y1, Y4
	VFMADD213PD 448(R10), Y1, Y4
	VFMADD213PD 480(R10), Y1, Y4 // p = fma(p, r, c0)
	EXPFINISH(Y0, Y2, Y4, 0)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $4, CX
	JMP  exploop

expdone:
	VZEROUPPER
	RET

// One step of the direct micro-kernel: as STEP, with the six A values read from six rows of a
// row-major A (SI, SI+lda, SI+2lda, R10 = SI+3lda, R10+lda, R10+2lda; BX = lda in bytes).
#define DSTEP(boff) \
	VMOVUPD boff(DI), Y0 \
	VMOVUPD boff+32(DI), Y1 \
	VBROADCASTSD (SI), Y2 \
	VBROADCASTSD (SI)(BX*1), Y3 \
	VFMADD231PD Y0, Y2, Y4 \
	VFMADD231PD Y1, Y2, Y5 \
	VFMADD231PD Y0, Y3, Y6 \
	VFMADD231PD Y1, Y3, Y7 \
	VBROADCASTSD (SI)(BX*2), Y2 \
	VBROADCASTSD (R10), Y3 \
	VFMADD231PD Y0, Y2, Y8 \
	VFMADD231PD Y1, Y2, Y9 \
	VFMADD231PD Y0, Y3, Y10 \
	VFMADD231PD Y1, Y3, Y11 \
	VBROADCASTSD (R10)(BX*1), Y2 \
	VBROADCASTSD (R10)(BX*2), Y3 \
	VFMADD231PD Y0, Y2, Y12 \
	VFMADD231PD Y1, Y2, Y13 \
	VFMADD231PD Y0, Y3, Y14 \
	VFMADD231PD Y1, Y3, Y15 \
	ADDQ $8, SI \
	ADDQ $8, R10

// func kernelDirectAVX2(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64)
TEXT ·kernelDirectAVX2(SB), NOSPLIT, $0-104
	MOVQ k+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ lda+32(FP), BX
	SHLQ $3, BX
	LEAQ (SI)(BX*2), R10
	ADDQ BX, R10
	MOVQ b_base+40(FP), DI
	MOVQ c_base+64(FP), DX
	MOVQ ldc+88(FP), R8
	SHLQ $3, R8
	ZEROACC

dloop4:
	CMPQ CX, $4
	JLT  dloop1
	DSTEP(0)
	DSTEP(64)
	DSTEP(128)
	DSTEP(192)
	ADDQ $256, DI
	SUBQ $4, CX
	JMP  dloop4

dloop1:
	TESTQ CX, CX
	JE    ddone
	DSTEP(0)
	ADDQ $64, DI
	DECQ CX
	JMP  dloop1

ddone:
	VBROADCASTSD alpha+96(FP), Y0
	STOREALL
	VZEROUPPER
	RET

// One step of the 4x12 narrow kernel: row p of the B panel in Y0, Y1, Y2, the four A values
// (rows at SI, SI+BX, SI+2BX, R10) broadcast in turn into Y3, accumulators Y4..Y15 (row i in
// Y(4+3i), Y(5+3i), Y(6+3i)).
#define NSTEP(boff) \
	VMOVUPD boff(DI), Y0 \
	VMOVUPD boff+32(DI), Y1 \
	VMOVUPD boff+64(DI), Y2 \
	VBROADCASTSD (SI), Y3 \
	VFMADD231PD Y0, Y3, Y4 \
	VFMADD231PD Y1, Y3, Y5 \
	VFMADD231PD Y2, Y3, Y6 \
	VBROADCASTSD (SI)(BX*1), Y3 \
	VFMADD231PD Y0, Y3, Y7 \
	VFMADD231PD Y1, Y3, Y8 \
	VFMADD231PD Y2, Y3, Y9 \
	VBROADCASTSD (SI)(BX*2), Y3 \
	VFMADD231PD Y0, Y3, Y10 \
	VFMADD231PD Y1, Y3, Y11 \
	VFMADD231PD Y2, Y3, Y12 \
	VBROADCASTSD (R10), Y3 \
	VFMADD231PD Y0, Y3, Y13 \
	VFMADD231PD Y1, Y3, Y14 \
	VFMADD231PD Y2, Y3, Y15 \
	ADDQ $8, SI \
	ADDQ $8, R10

// C row i += alpha * acc row i for the narrow tile's three vectors (alpha in Y0).
#define NSTORE(v0, v1, v2) \
	VMOVUPD (DX), Y1 \
	VMOVUPD 32(DX), Y2 \
	VMOVUPD 64(DX), Y3 \
	VFMADD231PD v0, Y0, Y1 \
	VFMADD231PD v1, Y0, Y2 \
	VFMADD231PD v2, Y0, Y3 \
	VMOVUPD Y1, (DX) \
	VMOVUPD Y2, 32(DX) \
	VMOVUPD Y3, 64(DX) \
	ADDQ R8, DX

// func kernelNarrowAVX2(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64)
TEXT ·kernelNarrowAVX2(SB), NOSPLIT, $0-104
	MOVQ k+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ lda+32(FP), BX
	SHLQ $3, BX
	LEAQ (SI)(BX*2), R10
	ADDQ BX, R10
	MOVQ b_base+40(FP), DI
	MOVQ c_base+64(FP), DX
	MOVQ ldc+88(FP), R8
	SHLQ $3, R8
	ZEROACC

nloop4:
	CMPQ CX, $4
	JLT  nloop1
	NSTEP(0)
	NSTEP(96)
	NSTEP(192)
	NSTEP(288)
	ADDQ $384, DI
	SUBQ $4, CX
	JMP  nloop4

nloop1:
	TESTQ CX, CX
	JE    ndone
	NSTEP(0)
	ADDQ $96, DI
	DECQ CX
	JMP  nloop1

ndone:
	VBROADCASTSD alpha+96(FP), Y0
	NSTORE(Y4, Y5, Y6)
	NSTORE(Y7, Y8, Y9)
	NSTORE(Y10, Y11, Y12)
	NSTORE(Y13, Y14, Y15)
	VZEROUPPER
	RET
