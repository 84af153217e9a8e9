#include "textflag.h"

// func distAVX(e, row, nb []float64, na, tiny, c float64, root int)
// For j < len(e) &^ 3, lane by lane exactly as distArgsGo (dist.go):
// s = na + nb[j], r2 = s + row[j], r2 = 0 where r2 <= tiny*s; then
// root == 0: e[j] = (-r2) * 0.5 (= -r2/2, NaN signs included);
// root != 0: row[j] = c * sqrt(r2), e[j] = -row[j].
TEXT ·distAVX(SB), NOSPLIT, $0-104
	MOVQ e_base+0(FP), DI
	MOVQ e_len+8(FP), CX
	MOVQ row_base+24(FP), SI
	MOVQ nb_base+48(FP), DX
	VBROADCASTSD na+72(FP), Y10
	VBROADCASTSD tiny+80(FP), Y11
	VBROADCASTSD c+88(FP), Y12
	MOVQ root+96(FP), R8
	MOVQ $0x3FE0000000000000, AX // 0.5
	MOVQ AX, X13
	VBROADCASTSD X13, Y13
	MOVQ $0x8000000000000000, AX // sign bit
	MOVQ AX, X15
	VBROADCASTSD X15, Y15
	VXORPD Y14, Y14, Y14
	SHRQ $2, CX

distloop:
	TESTQ CX, CX
	JE    distdone
	VMOVUPD (DX), Y0
	VADDPD  Y10, Y0, Y0        // s = na + nb
	VMOVUPD (SI), Y1
	VADDPD  Y1, Y0, Y2         // r2 = s + x
	VMULPD  Y11, Y0, Y3        // tiny * s
	VCMPPD  $2, Y3, Y2, Y4     // r2 <= tiny * s
	VBLENDVPD Y4, Y14, Y2, Y2  // there 0
	TESTQ   R8, R8
	JNE     distroot
	VXORPD  Y15, Y2, Y2        // -r2
	VMULPD  Y13, Y2, Y2        // -r2/2 (times 0.5: the same rounding as the division)
	VMOVUPD Y2, (DI)
	JMP     distnext

distroot:
	VSQRTPD Y2, Y2
	VMULPD  Y12, Y2, Y2        // a = c sqrt(r2)
	VMOVUPD Y2, (SI)
	VXORPD  Y15, Y2, Y2        // -a
	VMOVUPD Y2, (DI)

distnext:
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JMP  distloop

distdone:
	VZEROUPPER
	RET
