package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/solver"
)

// The model encoding is a fixed sequence of fields, each written in little-endian binary:
// integers as int64, floats as their IEEE-754 bits, strings and slices as an int64 length
// followed by the elements, optional groups as a presence byte. It depends only on the
// model's values, never on what else a process has encoded (unlike encoding/gob, whose type
// numbers do), so the same model is the same bytes in every process.

type encoder struct {
	w   io.Writer
	buf [8]byte
	err error
}

func (e *encoder) u64(v uint64) {
	if e.err != nil {
		return
	}
	binary.LittleEndian.PutUint64(e.buf[:], v)
	_, e.err = e.w.Write(e.buf[:])
}

func (e *encoder) int(v int)       { e.u64(uint64(int64(v))) }
func (e *encoder) float(v float64) { e.u64(math.Float64bits(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.u64(1)
	} else {
		e.u64(0)
	}
}

func (e *encoder) str(s string) {
	e.int(len(s))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func (e *encoder) floats(v []float64) {
	e.int(len(v))
	for _, x := range v {
		e.float(x)
	}
}

func (e *encoder) ints(v []int) {
	e.int(len(v))
	for _, x := range v {
		e.int(x)
	}
}

func (e *encoder) strs(v []string) {
	e.int(len(v))
	for _, s := range v {
		e.str(s)
	}
}

func (e *encoder) model(m *Model) {
	e.int(m.Version)
	e.str(m.Method)
	e.str(m.Kernel)
	e.int(m.D)
	e.strs(m.Columns)
	e.str(m.Target)
	e.floats(m.Transform.XMean)
	e.floats(m.Transform.XScale)
	e.float(m.Transform.YMean)
	e.float(m.Transform.YScale)
	e.floats(m.Hyper.Lengthscales)
	e.float(m.Hyper.SignalVariance)
	e.float(m.Hyper.NoiseVariance)
	e.float(m.LogLik)
	e.floats(m.Trace)
	e.int(m.Iterations)
	e.int(m.NTrain)
	e.bool(m.GL != nil)
	if m.GL != nil {
		e.floats(m.GL.U)
		e.ints(m.GL.NodesPerDim)
	}
	e.bool(m.RFF != nil)
	if m.RFF != nil {
		e.floats(m.RFF.Omega)
		e.int(m.RFF.Features)
	}
	e.bool(m.Features != nil)
	if f := m.Features; f != nil {
		e.float(f.SF2)
		e.float(f.SN2)
		e.floats(f.SqrtH)
		e.floats(f.Beta)
		e.floats(f.R)
	}
	e.bool(m.Exact != nil)
	if x := m.Exact; x != nil {
		e.int(int(x.Kernel.Family))
		e.floats(x.Kernel.Lengthscales)
		e.float(x.Kernel.SignalVariance)
		e.float(x.Noise)
		e.floats(x.X)
		e.int(x.D)
		e.floats(x.Alpha)
		e.floats(x.R)
	}
	// GRIEF comes after the fixed fields and is written only for GRIEF models (or as an absent
	// flag before an expansion posterior), so models written before it existed (which end
	// here) still decode.
	if g := m.GRIEF; g != nil {
		e.bool(true)
		e.floats(g.Lengthscales)
		e.float(g.SignalVariance)
		e.floatss(g.Grid)
		e.floatss(g.Q)
		e.floatss(g.LogLam)
		e.ints(g.Idx)
		e.floats(g.LogLamP)
		e.bool(m.GRIEFPost != nil)
		if q := m.GRIEFPost; q != nil {
			e.str(q.Inference)
			e.floats(q.Beta)
			e.floats(q.C)
			e.floats(q.W)
			e.int(q.Samples)
		}
	} else if m.GRIEFPost != nil {
		e.bool(false)
		e.err = errors.New("GRIEF posterior without a GRIEF map")
	}
	// The expansion posterior follows, after an explicit GRIEF-absent flag when there is no
	// GRIEF section; models without it end as before.
	if x := m.Expansion; x != nil {
		if m.GRIEF == nil {
			e.bool(false)
		}
		e.bool(true)
		e.int(int(x.Kernel.Family))
		e.floats(x.Kernel.Lengthscales)
		e.float(x.Kernel.SignalVariance)
		e.floats(x.X)
		e.int(x.D)
		e.floats(x.Alpha)
		e.floats(x.Minus)
		e.int(x.RMinus)
		e.floats(x.Plus)
		e.int(x.RPlus)
		e.float(x.PlusScale)
	}
	e.extensions(m)
}

// extension is an optional tagged section of the model encoding, written after the fixed
// fields and the GRIEF and expansion sections. New optional data goes here, one entry per
// tag, so that sections added independently never depend on each other's order and models
// written before a tag existed still decode.
type extension struct {
	tag     string
	present func(m *Model) bool
	encode  func(e *encoder, m *Model)
	decode  func(d *decoder, m *Model)
}

// extensions lists the tagged sections in the order they are written. Each tag appears at
// most once in an encoding, in this order.
func extensions() []extension {
	return []extension{
		{
			tag:     "warnings",
			present: func(m *Model) bool { return len(m.Warnings) > 0 },
			encode: func(e *encoder, m *Model) {
				e.int(len(m.Warnings))
				for _, w := range m.Warnings {
					e.str(w.Code)
					e.str(w.Message)
				}
			},
			decode: func(d *decoder, m *Model) {
				n := d.length(16)
				for i := 0; i < n && d.err == nil; i++ {
					m.Warnings = append(m.Warnings, Warning{Code: d.str(), Message: d.str()})
				}
			},
		},
		{
			tag:     "loglik_se",
			present: func(m *Model) bool { return m.LogLikSE != 0 },
			encode:  func(e *encoder, m *Model) { e.float(m.LogLikSE) },
			decode:  func(d *decoder, m *Model) { m.LogLikSE = d.float() },
		},
		{
			tag:     "domain",
			present: func(m *Model) bool { return m.Domain != nil },
			encode:  func(e *encoder, m *Model) { e.floats(m.Domain.Lo); e.floats(m.Domain.Hi) },
			decode:  func(d *decoder, m *Model) { m.Domain = &Domain{Lo: d.floats(), Hi: d.floats()} },
		},
		{
			tag:     "sizing",
			present: func(m *Model) bool { return m.Sizing != nil },
			encode:  func(e *encoder, m *Model) { e.floats(m.Sizing.LengthscaleMin); e.floats(m.Sizing.LengthscaleMax) },
			decode: func(d *decoder, m *Model) {
				m.Sizing = &Sizing{LengthscaleMin: d.floats(), LengthscaleMax: d.floats()}
			},
		},
		{
			tag:     "method_choice",
			present: func(m *Model) bool { return m.Choice != nil },
			encode:  func(e *encoder, m *Model) { e.str(m.Choice.Requested); e.str(m.Choice.Reason) },
			decode:  func(d *decoder, m *Model) { m.Choice = &MethodChoice{Requested: d.str(), Reason: d.str()} },
		},
	}
}

// extensions writes the tagged trailer: when any extension is present, explicit absent
// flags for the GRIEF and expansion sections (if not written), then the count of sections
// and, per section, its tag and its payload as a length-prefixed byte string.
func (e *encoder) extensions(m *Model) {
	var present []extension
	for _, x := range extensions() {
		if x.present(m) {
			present = append(present, x)
		}
	}
	if len(present) == 0 {
		return
	}
	if m.GRIEF == nil && m.Expansion == nil {
		e.bool(false)
	}
	if m.Expansion == nil {
		e.bool(false)
	}
	e.int(len(present))
	for _, x := range present {
		e.str(x.tag)
		var buf bytes.Buffer
		sub := &encoder{w: &buf}
		x.encode(sub, m)
		if sub.err != nil && e.err == nil {
			e.err = sub.err
		}
		e.str(buf.String())
	}
}

// extensions reads the tagged trailer written by encoder.extensions. Tags must be known to
// this build, appear once each and in the encoder's order, and each payload must be read
// exactly, so every accepted model encodes back to the bytes it was read from.
func (d *decoder) extensions(m *Model) {
	n := d.length(8)
	if d.err == nil && n == 0 {
		d.err = fmt.Errorf("%w: an empty extension trailer", errTruncated)
		return
	}
	known := extensions()
	next := 0
	for i := 0; i < n && d.err == nil; i++ {
		tag := d.str()
		payload := d.str()
		if d.err != nil {
			return
		}
		j := next
		for j < len(known) && known[j].tag != tag {
			j++
		}
		if j == len(known) {
			d.err = fmt.Errorf("%w: unknown or out-of-order model section %q (written by a newer build?)", errTruncated, tag)
			return
		}
		next = j + 1
		sub := &decoder{b: []byte(payload)}
		known[j].decode(sub, m)
		switch {
		case sub.err != nil:
			d.err = fmt.Errorf("model section %q: %w", tag, sub.err)
		case len(sub.b) != 0:
			d.err = fmt.Errorf("%w: %d bytes after model section %q", errTruncated, len(sub.b), tag)
		case !known[j].present(m):
			d.err = fmt.Errorf("%w: empty model section %q written out", errTruncated, tag)
		}
	}
}

func (e *encoder) floatss(v [][]float64) {
	e.int(len(v))
	for _, x := range v {
		e.floats(x)
	}
}

// decoder reads what encoder wrote. Every length is checked against the bytes that remain,
// so corrupt input fails with an error instead of a huge allocation or a panic.
type decoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated or corrupt model")

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = errTruncated
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) int() int {
	v := int64(d.u64())
	if v < math.MinInt32 || v > math.MaxInt32 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: integer %d out of range", errTruncated, v)
		}
		return 0
	}
	return int(v)
}

func (d *decoder) float() float64 { return math.Float64frombits(d.u64()) }

func (d *decoder) bool() bool {
	switch d.u64() {
	case 0:
		return false
	case 1:
		return true
	}
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad presence flag", errTruncated)
	}
	return false
}

// length reads a length whose elements take at least size bytes each.
func (d *decoder) length(size int) int {
	n := d.int()
	if n < 0 || n*size > len(d.b) {
		if d.err == nil {
			d.err = fmt.Errorf("%w: length %d exceeds the remaining %d bytes", errTruncated, n, len(d.b))
		}
		return 0
	}
	return n
}

func (d *decoder) str() string {
	n := d.length(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) floats() []float64 {
	n := d.length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = d.float()
	}
	return v
}

func (d *decoder) ints() []int {
	n := d.length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = d.int()
	}
	return v
}

func (d *decoder) floatss() [][]float64 {
	n := d.length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([][]float64, n)
	for i := range v {
		v[i] = d.floats()
	}
	return v
}

func (d *decoder) strs() []string {
	n := d.length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.str()
	}
	return v
}

func (d *decoder) model() *Model {
	m := &Model{}
	m.Version = d.int()
	m.Method = d.str()
	m.Kernel = d.str()
	m.D = d.int()
	m.Columns = d.strs()
	m.Target = d.str()
	m.Transform.XMean = d.floats()
	m.Transform.XScale = d.floats()
	m.Transform.YMean = d.float()
	m.Transform.YScale = d.float()
	m.Hyper.Lengthscales = d.floats()
	m.Hyper.SignalVariance = d.float()
	m.Hyper.NoiseVariance = d.float()
	m.LogLik = d.float()
	m.Trace = d.floats()
	m.Iterations = d.int()
	m.NTrain = d.int()
	if d.bool() {
		m.GL = &GLParams{U: d.floats(), NodesPerDim: d.ints()}
	}
	if d.bool() {
		m.RFF = &RFFParams{Omega: d.floats(), Features: d.int()}
	}
	if d.bool() {
		f := &solver.FeaturePredictor{}
		f.SF2 = d.float()
		f.SN2 = d.float()
		f.SqrtH = d.floats()
		f.Beta = d.floats()
		f.R = d.floats()
		m.Features = f
	}
	if d.bool() {
		x := &solver.ExactPredictor{}
		x.Kernel.Family = kernel.Family(d.int())
		x.Kernel.Lengthscales = d.floats()
		x.Kernel.SignalVariance = d.float()
		x.Noise = d.float()
		x.X = d.floats()
		x.D = d.int()
		x.Alpha = d.floats()
		x.R = d.floats()
		m.Exact = x
	}
	// The trailing GRIEF and expansion sections are optional: a model may end before either.
	// Encode writes a false presence flag only for an absent GRIEF section directly before an
	// expansion, so any other false flag here is corrupt, and every model Decode accepts
	// encodes back to the bytes it was read from.
	griefAbsent := false
	if d.err == nil && len(d.b) != 0 {
		if d.bool() {
			g := &GRIEFParams{}
			g.Lengthscales = d.floats()
			g.SignalVariance = d.float()
			g.Grid = d.floatss()
			g.Q = d.floatss()
			g.LogLam = d.floatss()
			g.Idx = d.ints()
			g.LogLamP = d.floats()
			m.GRIEF = g
			if d.bool() {
				q := &GRIEFPost{}
				q.Inference = d.str()
				q.Beta = d.floats()
				q.C = d.floats()
				q.W = d.floats()
				q.Samples = d.int()
				m.GRIEFPost = q
			}
		} else {
			griefAbsent = true
		}
	}
	if d.err == nil && (griefAbsent || len(d.b) != 0) {
		if d.bool() {
			x := &solver.ExpansionPredictor{}
			x.Kernel.Family = kernel.Family(d.int())
			x.Kernel.Lengthscales = d.floats()
			x.Kernel.SignalVariance = d.float()
			x.X = d.floats()
			x.D = d.int()
			x.Alpha = d.floats()
			x.Minus = d.floats()
			x.RMinus = d.int()
			x.Plus = d.floats()
			x.RPlus = d.int()
			x.PlusScale = d.float()
			m.Expansion = x
		} else if d.err == nil && len(d.b) == 0 {
			d.err = fmt.Errorf("%w: an absent optional section written out", errTruncated)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.extensions(m)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the end of the model", errTruncated, len(d.b))
	}
	return m
}
