package linalg

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Fixed blocking. The bits of every result depend on kc (the inner-dimension panel) and on
// nothing else here; mr x nr is the micro-kernel's tile, mc x ncTask the unit of work of one
// goroutine, mChunk the rows of op(A) packed at once.
const (
	mr     = 6   // rows of the micro-kernel tile
	nr     = 8   // columns of the micro-kernel tile (two AVX2 vectors)
	kc     = 256 // inner-dimension panel: fixes the summation order
	mc     = 96  // rows per task (a multiple of mr; mc x kc of packed A stays in L2)
	ncTask = 128 // columns per task (a multiple of nr)
	ncPack = 4096
	// directMaxN is the widest product (columns of C) for which A is read in place.
	directMaxN = 2 * nr
	// mrN x nw is the narrow micro-kernel's tile: products of nr < n <= nw columns (CG's
	// probes and right-hand side, 11 columns) run on it instead of two mr x nr tiles, one
	// of them mostly padding (11 of 16 lanes useful against 11 of 12).
	mrN = 4
	nw  = 12
	// narrowRows is the rows of one task of the narrow product (a multiple of mrN).
	narrowRows = 8
	mChunk     = 16 * mc

	// parallelFlops is the size (m n k) below which a product runs on the calling goroutine.
	parallelFlops = 1 << 21
)

// kernelFunc computes the mr x nr tile C += alpha * A B for packed panels: a holds k groups
// of mr values (column k of the A panel), b holds k groups of nr values (row k of the B
// panel). acc_ij starts at zero and takes acc = fma(a_ik, b_kj, acc) for k = 0..k-1, then
// C_ij = fma(alpha, acc_ij, C_ij). c is row-major with stride ldc.
type tileFunc func(k int, a, b, c []float64, ldc int, alpha float64)

// directFunc is tileFunc with A read in place: the mr rows of a row-major A starting at a[0],
// stride lda (A_ip = a[i*lda+p]), instead of a packed panel. Same operations, same order.
type directFunc func(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64)

// kernels is a matched set of micro-kernels: all assembly or all portable Go. narrow is
// directFunc's shape on the mrN x nw tile (A read in place, B a packed panel of nw columns).
type kernels struct {
	tile   tileFunc
	direct directFunc
	narrow directFunc
}

// kernelFunc selects the micro-kernels a routine runs on (tests run both sets).
type kernelFunc = *kernels

// goKernels are the portable micro-kernels.
var goKernels = &kernels{tile: kernelGo, direct: kernelDirectGo, narrow: kernelNarrowGo}

// kernelGo is the portable micro-kernel: the same operations in the same order as the
// assembly kernel.
func kernelGo(k int, a, b, c []float64, ldc int, alpha float64) {
	var acc [mr][nr]float64
	a = a[:k*mr]
	b = b[:k*nr]
	for p := 0; p < k; p++ {
		ap := a[p*mr : p*mr+mr : p*mr+mr]
		bp := b[p*nr : p*nr+nr : p*nr+nr]
		for i := range mr {
			ai := ap[i]
			row := &acc[i]
			for j := range nr {
				row[j] = math.FMA(ai, bp[j], row[j])
			}
		}
	}
	storeTile(&acc, c, ldc, alpha)
}

// storeTile sets C_ij = fma(alpha, acc_ij, C_ij) for the mr x nr tile.
func storeTile(acc *[mr][nr]float64, c []float64, ldc int, alpha float64) {
	for i := range mr {
		ci := c[i*ldc : i*ldc+nr]
		for j := range nr {
			ci[j] = math.FMA(alpha, acc[i][j], ci[j])
		}
	}
}

// kernelDirectGo is kernelGo reading A in place (directFunc).
func kernelDirectGo(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64) {
	var acc [mr][nr]float64
	b = b[:k*nr]
	for p := 0; p < k; p++ {
		bp := b[p*nr : p*nr+nr : p*nr+nr]
		for i := range mr {
			ai := a[i*lda+p]
			row := &acc[i]
			for j := range nr {
				row[j] = math.FMA(ai, bp[j], row[j])
			}
		}
	}
	storeTile(&acc, c, ldc, alpha)
}

// kernelNarrowGo is kernelDirectGo on the mrN x nw tile: acc_ij = fma(a_ip, b_pj, acc_ij)
// for p = 0..k-1 from zero, then C_ij = fma(alpha, acc_ij, C_ij), for the mrN rows of A at
// a[0] (stride lda) and the packed panel b (k rows of nw values).
func kernelNarrowGo(k int, a []float64, lda int, b, c []float64, ldc int, alpha float64) {
	var acc [mrN][nw]float64
	b = b[:k*nw]
	for p := 0; p < k; p++ {
		bp := b[p*nw : p*nw+nw : p*nw+nw]
		for i := range mrN {
			ai := a[i*lda+p]
			row := &acc[i]
			for j := range nw {
				row[j] = math.FMA(ai, bp[j], row[j])
			}
		}
	}
	for i := range mrN {
		ci := c[i*ldc : i*ldc+nw]
		for j := range nw {
			ci[j] = math.FMA(alpha, acc[i][j], ci[j])
		}
	}
}

// view is op(X) of a row-major matrix: element (i, j) is data[i*stride+j], or
// data[j*stride+i] when trans is set.
type view struct {
	data   []float64
	stride int
	trans  bool
}

func viewOf(g blas64.General, t blas.Transpose) view {
	return view{data: g.Data, stride: g.Stride, trans: t != blas.NoTrans}
}

// at returns the view of op(X) starting at element (i, j).
func (v view) at(i, j int) view {
	if v.trans {
		i, j = j, i
	}
	off := i*v.stride + j
	if off >= len(v.data) {
		return view{stride: v.stride, trans: v.trans}
	}
	v.data = v.data[off:]
	return v
}

// tri selects which part of a square C a product writes.
type tri int

const (
	full  tri = iota
	upper     // j >= i
	lower     // j <= i
)

// inTri reports whether the tile rows [i0, i1) x columns [j0, j1) meets the written part, and
// whether it lies entirely inside it.
func (t tri) tile(i0, i1, j0, j1 int) (meets, inside bool) {
	switch t {
	case upper:
		return j1-1 >= i0, j0 >= i1-1
	case lower:
		return j0 <= i1-1, j1-1 <= i0
	}
	return true, true
}

// gemmCore computes C += alpha op(A) op(B) for op(A) m x k and op(B) k x n, on the part of C
// selected by t. C is row-major with stride ldc. It is the only place where products are
// summed, so it fixes the bits of every routine in the package.
func gemmCore(kern kernelFunc, m, n, k int, alpha float64, a, b view, c []float64, ldc int, t tri) {
	if m == 0 || n == 0 || k == 0 || alpha == 0 {
		return
	}
	workers := 1
	if float64(m)*float64(n)*float64(k) >= parallelFlops {
		workers = runtime.GOMAXPROCS(0)
	}
	if kern.narrow != nil && !a.trans && n > nr && n <= nw && t == full {
		gemmNarrow(kern, workers, m, n, k, alpha, a, b, c, ldc)
		return
	}
	bpb := getBuf(roundUp(min(n, ncPack), nr) * min(k, kc))
	apb := getBuf(roundUp(min(m, mChunk), mr) * min(k, kc))
	defer packPool.Put(bpb)
	defer packPool.Put(apb)
	ap, bp := *apb, *bpb
	for jc := 0; jc < n; jc += ncPack {
		nc := min(ncPack, n-jc)
		for pc := 0; pc < k; pc += kc {
			kk := min(kc, k-pc)
			if meets, _ := t.tile(0, m, jc, jc+nc); !meets {
				continue
			}
			packSplit(workers, nc, nr, kk, func(lo, hi int) { packB(bp[lo*kk:], b.at(pc, jc+lo), kk, hi-lo) })
			for ic := 0; ic < m; ic += mChunk {
				mm := min(mChunk, m-ic)
				if meets, _ := t.tile(ic, ic+mm, jc, jc+nc); !meets {
					continue
				}
				var direct view
				if !a.trans && n <= directMaxN {
					// Few columns: A is read about once, so packing it would cost more
					// than it saves; the kernel reads its rows in place.
					direct = a.at(ic, pc)
				} else {
					packSplit(workers, mm, mr, kk, func(lo, hi int) { packA(ap[lo*kk:], a.at(ic+lo, pc), hi-lo, kk) })
				}
				macro(kern, workers, ap, direct, bp, mm, nc, kk, alpha, c, ic, jc, ldc, t)
			}
		}
	}
}

// gemmNarrow is gemmCore for a row-major op(A) and nr < n <= nw columns, on the narrow
// tile. op(B) is packed once, nw wide (zero-padded); the rows of C are cut into tasks of
// narrowRows rows shared by up to workers goroutines, and a task runs, for each inner panel
// of kc in turn, the kernel on each of its mrN-row tiles, so that A's rows are read from
// start to end as long streams. Each C_ij takes the same operations in the same order as in
// gemmCore's other paths (one accumulator per inner panel, added by one fma, panels in
// order), so the tile shape never changes the bits.
func gemmNarrow(kern kernelFunc, workers, m, n, k int, alpha float64, a, b view, c []float64, ldc int) {
	bpb := getBuf(nw * k)
	defer packPool.Put(bpb)
	bp := *bpb
	packNarrow(bp, b, k, n)
	tasks := (m + narrowRows - 1) / narrowRows
	run := func(tk int) {
		i0, i1 := tk*narrowRows, min((tk+1)*narrowRows, m)
		var tmp [narrowRows * nw]float64
		for i := i0; i < i1; i++ {
			copy(tmp[(i-i0)*nw:(i-i0)*nw+n], c[i*ldc:i*ldc+n])
		}
		var pad []float64
		if rem := (i1 - i0) % mrN; rem != 0 { // the last rows: copied into a zero-padded tile
			pad = make([]float64, mrN*k)
			for r := range rem {
				copy(pad[r*k:(r+1)*k], a.at(i1-rem+r, 0).data[:k])
			}
		}
		for pc := 0; pc < k; pc += kc {
			kk := min(kc, k-pc)
			bpan := bp[pc*nw : (pc+kk)*nw]
			for i := i0; i < i1; i += mrN {
				ct := tmp[(i-i0)*nw:]
				if i+mrN <= i1 {
					av := a.at(i, pc)
					kern.narrow(kk, av.data, av.stride, bpan, ct, nw, alpha)
					continue
				}
				kern.narrow(kk, pad[pc:], k, bpan, ct, nw, alpha)
			}
		}
		for i := i0; i < i1; i++ {
			copy(c[i*ldc:i*ldc+n], tmp[(i-i0)*nw:(i-i0)*nw+n])
		}
	}
	RunTasks(workers, tasks, run)
}

// packNarrow copies op(B)[0:k, 0:n] (n <= nw) into one panel of nw columns: dst[p*nw+j] =
// op(B)[p, j], zero-padded past n.
func packNarrow(dst []float64, b view, k, n int) {
	if b.trans {
		for j := range n {
			src := b.data[j*b.stride : j*b.stride+k]
			for p, v := range src {
				dst[p*nw+j] = v
			}
		}
		for p := range k {
			clear(dst[p*nw+n : p*nw+nw])
		}
		return
	}
	for p := range k {
		d := dst[p*nw : p*nw+nw : p*nw+nw]
		copy(d[:n], b.data[p*b.stride:p*b.stride+n])
		clear(d[n:])
	}
}

// packSplitMin is the fewest values (rows or columns times the panel depth) whose packing is
// shared among goroutines.
const packSplitMin = 1 << 15

// packSplit runs pack(lo, hi) over [0, total) (rows of A or columns of B, each k deep) cut at
// multiples of q into up to workers pieces, on as many goroutines, the caller taking the
// first. Every value lands in the same place whichever goroutine copies it, so the packed
// panels, and the bits of the product, do not depend on the split.
func packSplit(workers, total, q, k int, pack func(lo, hi int)) {
	pieces := min(workers, (total+q-1)/q)
	if pieces <= 1 || total*k < packSplitMin {
		pack(0, total)
		return
	}
	per := roundUp((total+pieces-1)/pieces, q)
	var wg sync.WaitGroup
	for lo := per; lo < total; lo += per {
		wg.Go(func() { pack(lo, min(lo+per, total)) })
	}
	pack(0, min(per, total))
	wg.Wait()
}

// packPool recycles packing buffers between calls: a cache with no observable state (a
// buffer's contents are always overwritten before use).
var packPool sync.Pool

func getBuf(n int) *[]float64 {
	if b, ok := packPool.Get().(*[]float64); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]float64, n)
	return &b
}

func roundUp(x, q int) int { return (x + q - 1) / q * q }

// packA copies op(A)[0:m, 0:k] into panels of mr rows: panel q holds, for each p, the mr
// values op(A)[q mr + i, p], zero-padded past m.
func packA(dst []float64, a view, m, k int) {
	for q := 0; q < m; q += mr {
		rows := min(mr, m-q)
		panel := dst[q*k : q*k+mr*k]
		if a.trans {
			for p := range k {
				src := a.data[p*a.stride+q:]
				d := panel[p*mr : p*mr+mr : p*mr+mr]
				if rows == mr {
					src = src[:mr:mr]
					d[0], d[1], d[2], d[3], d[4], d[5] = src[0], src[1], src[2], src[3], src[4], src[5]
					continue
				}
				copy(d, src[:rows])
				clear(d[rows:])
			}
			continue
		}
		if rows == mr {
			r0 := a.data[q*a.stride : q*a.stride+k]
			r1 := a.data[(q+1)*a.stride : (q+1)*a.stride+k]
			r2 := a.data[(q+2)*a.stride : (q+2)*a.stride+k]
			r3 := a.data[(q+3)*a.stride : (q+3)*a.stride+k]
			r4 := a.data[(q+4)*a.stride : (q+4)*a.stride+k]
			r5 := a.data[(q+5)*a.stride : (q+5)*a.stride+k]
			for p := range k {
				d := panel[p*mr : p*mr+mr : p*mr+mr]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
			continue
		}
		for i := range rows {
			src := a.data[(q+i)*a.stride : (q+i)*a.stride+k]
			for p, v := range src {
				panel[p*mr+i] = v
			}
		}
		for i := rows; i < mr; i++ {
			for p := range k {
				panel[p*mr+i] = 0
			}
		}
	}
}

// packB copies op(B)[0:k, 0:n] into panels of nr columns: panel q holds, for each p, the nr
// values op(B)[p, q nr + j], zero-padded past n.
func packB(dst []float64, b view, k, n int) {
	for q := 0; q < n; q += nr {
		cols := min(nr, n-q)
		panel := dst[q*k : q*k+nr*k]
		if !b.trans {
			for p := range k {
				src := b.data[p*b.stride+q:]
				d := panel[p*nr : p*nr+nr : p*nr+nr]
				if cols == nr {
					src = src[:nr:nr]
					d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = src[0], src[1], src[2], src[3], src[4], src[5], src[6], src[7]
					continue
				}
				copy(d, src[:cols])
				clear(d[cols:])
			}
			continue
		}
		if cols == nr {
			r0 := b.data[q*b.stride : q*b.stride+k]
			r1 := b.data[(q+1)*b.stride : (q+1)*b.stride+k]
			r2 := b.data[(q+2)*b.stride : (q+2)*b.stride+k]
			r3 := b.data[(q+3)*b.stride : (q+3)*b.stride+k]
			r4 := b.data[(q+4)*b.stride : (q+4)*b.stride+k]
			r5 := b.data[(q+5)*b.stride : (q+5)*b.stride+k]
			r6 := b.data[(q+6)*b.stride : (q+6)*b.stride+k]
			r7 := b.data[(q+7)*b.stride : (q+7)*b.stride+k]
			for p := range k {
				d := panel[p*nr : p*nr+nr : p*nr+nr]
				d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p], r6[p], r7[p]
			}
			continue
		}
		for j := range cols {
			src := b.data[(q+j)*b.stride : (q+j)*b.stride+k]
			for p, v := range src {
				panel[p*nr+j] = v
			}
		}
		for j := cols; j < nr; j++ {
			for p := range k {
				panel[p*nr+j] = 0
			}
		}
	}
}

// macro runs the micro-kernel over the packed m x k block of A (rows ic.. of C) and the
// packed k x n block of B (columns jc.. of C), split into mc x ncTask tasks shared by up to
// workers goroutines. Tasks write disjoint tiles, so the split never changes the bits.
func macro(kern kernelFunc, workers int, ap []float64, direct view, bp []float64, m, n, k int, alpha float64, c []float64, ic, jc, ldc int, t tri) {
	type task struct{ i0, j0 int }
	var tasks []task
	for i0 := 0; i0 < m; i0 += mc {
		for j0 := 0; j0 < n; j0 += ncTask {
			if meets, _ := t.tile(ic+i0, ic+min(i0+mc, m), jc+j0, jc+min(j0+ncTask, n)); meets {
				tasks = append(tasks, task{i0, j0})
			}
		}
	}
	run := func(tk task) {
		var tmp [mr * nr]float64
		i1, j1 := min(tk.i0+mc, m), min(tk.j0+ncTask, n)
		for j := tk.j0; j < j1; j += nr {
			bpan := bp[j*k : j*k+nr*k]
			cols := min(nr, n-j)
			for i := tk.i0; i < i1; i += mr {
				rows := min(mr, m-i)
				gi, gj := ic+i, jc+j
				meets, inside := t.tile(gi, gi+rows, gj, gj+cols)
				if !meets {
					continue
				}
				var apan []float64
				switch {
				case direct.data == nil:
					apan = ap[i*k : i*k+mr*k]
				case rows < mr: // a partial panel of an unpacked A: pack it
					apan = make([]float64, mr*k)
					packA(apan, direct.at(i, 0), rows, k)
				}
				if inside && rows == mr && cols == nr {
					if apan == nil {
						kern.direct(k, direct.at(i, 0).data, direct.stride, bpan, c[gi*ldc+gj:], ldc, alpha)
						continue
					}
					kern.tile(k, apan, bpan, c[gi*ldc+gj:], ldc, alpha)
					continue
				}
				// Edge or diagonal tile: run the kernel on a copy, write back the selected part.
				for r := range rows {
					copy(tmp[r*nr:r*nr+cols], c[(gi+r)*ldc+gj:(gi+r)*ldc+gj+cols])
				}
				if apan == nil {
					kern.direct(k, direct.at(i, 0).data, direct.stride, bpan, tmp[:], nr, alpha)
				} else {
					kern.tile(k, apan, bpan, tmp[:], nr, alpha)
				}
				for r := range rows {
					for s := range cols {
						if t == full || (t == upper && gj+s >= gi+r) || (t == lower && gj+s <= gi+r) {
							c[(gi+r)*ldc+gj+s] = tmp[r*nr+s]
						}
					}
				}
			}
		}
	}
	RunTasks(workers, len(tasks), func(i int) { run(tasks[i]) })
}

// RunTasks runs run(0..n-1), each once, on up to workers goroutines that take the next task
// as they finish one (on the caller's goroutine when one worker suffices). The tasks write
// disjoint outputs, so the split never changes the bits.
func RunTasks(workers, n int, run func(int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			run(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				run(i)
			}
		})
	}
	wg.Wait()
}

// scale sets C = beta C on the part selected by t (C = 0 when beta is 0, whatever C held, as
// in the reference BLAS).
func scale(beta float64, m, n int, c []float64, ldc int, t tri) {
	if beta == 1 {
		return
	}
	for i := range m {
		j0, j1 := 0, n
		switch t {
		case upper:
			j0 = i
		case lower:
			j1 = i + 1
		}
		row := c[i*ldc+j0 : i*ldc+j1]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Gemm computes C = alpha op(A) op(B) + beta C, with the arguments of blas64.Gemm.
func Gemm(tA, tB blas.Transpose, alpha float64, a, b blas64.General, beta float64, c blas64.General) {
	gemmWith(bestKernel, tA, tB, alpha, a, b, beta, c)
}

func gemmWith(kern kernelFunc, tA, tB blas.Transpose, alpha float64, a, b blas64.General, beta float64, c blas64.General) {
	m, k := a.Rows, a.Cols
	if tA != blas.NoTrans {
		m, k = k, m
	}
	kb, n := b.Rows, b.Cols
	if tB != blas.NoTrans {
		kb, n = n, kb
	}
	if k != kb || c.Rows != m || c.Cols != n {
		panic("linalg: Gemm: dimension mismatch")
	}
	scale(beta, m, n, c.Data, c.Stride, full)
	gemmCore(kern, m, n, k, alpha, viewOf(a, tA), viewOf(b, tB), c.Data, c.Stride, full)
}

// Syrk computes the triangle c.Uplo of C = alpha A A^T + beta C (t = blas.NoTrans, A is
// n x k) or C = alpha A^T A + beta C (t = blas.Trans, A is k x n), with the arguments of
// blas64.Syrk. The Gram accumulation G += Z^T Z is Syrk(blas.Trans, 1, Z, 1, G).
func Syrk(t blas.Transpose, alpha float64, a blas64.General, beta float64, c blas64.Symmetric) {
	syrkWith(bestKernel, t, alpha, a, beta, c)
}

func syrkWith(kern kernelFunc, t blas.Transpose, alpha float64, a blas64.General, beta float64, c blas64.Symmetric) {
	n, k := a.Rows, a.Cols
	if t != blas.NoTrans {
		n, k = k, n
	}
	if c.N != n {
		panic("linalg: Syrk: dimension mismatch")
	}
	part := upper
	if c.Uplo == blas.Lower {
		part = lower
	}
	opB := blas.Trans
	if t != blas.NoTrans {
		opB = blas.NoTrans
	}
	scale(beta, n, n, c.Data, c.Stride, part)
	gemmCore(kern, n, n, k, alpha, viewOf(a, t), viewOf(a, opB), c.Data, c.Stride, part)
}
