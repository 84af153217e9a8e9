package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gpreduce/gpreduce/internal/kernel"
)

// The model encoding is a fixed sequence of fields, each written in little-endian binary:
// integers as int64, floats as their IEEE-754 bits, strings and slices as an int64 length
// followed by the elements, presence flags as 0 or 1. It depends only on the model's values,
// never on what else a process has encoded (unlike encoding/gob, whose type numbers do), so
// the same model is the same bytes in every process.
//
// The body of Version 2 is:
//
//	the common fields: Version, Method, Kernel, D, Columns, Target, the transform, the
//	    hyperparameters, LogLik, Trace, Iterations, NTrain (encoder.common)
//	the posterior's registered name, then its section as a length-prefixed byte string
//	    (Posterior.Encode)
//	the number of tagged sections, then per section its tag and its payload as a
//	    length-prefixed byte string (extensions)
//
// Version-1 bodies (the same common fields, then a fixed sequence of per-method groups) are
// still read, by codec_v1.go.

// Encoder writes the fields of a model encoding. A posterior's Encode writes its section
// with it. The first error is kept and stops all later writes.
type Encoder struct {
	w   io.Writer
	buf [8]byte
	err error
}

func (e *Encoder) u64(v uint64) {
	if e.err != nil {
		return
	}
	binary.LittleEndian.PutUint64(e.buf[:], v)
	_, e.err = e.w.Write(e.buf[:])
}

// Int writes an integer as an int64.
func (e *Encoder) Int(v int) { e.u64(uint64(int64(v))) }

// Float writes a float64 as its IEEE-754 bits.
func (e *Encoder) Float(v float64) { e.u64(math.Float64bits(v)) }

// Bool writes a presence flag, 1 or 0.
func (e *Encoder) Bool(v bool) {
	if v {
		e.u64(1)
	} else {
		e.u64(0)
	}
}

// Str writes a string: its length, then its bytes.
func (e *Encoder) Str(s string) {
	e.Int(len(s))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// Floats writes a slice of floats: its length, then the elements.
func (e *Encoder) Floats(v []float64) {
	e.Int(len(v))
	for _, x := range v {
		e.Float(x)
	}
}

// Ints writes a slice of integers: its length, then the elements.
func (e *Encoder) Ints(v []int) {
	e.Int(len(v))
	for _, x := range v {
		e.Int(x)
	}
}

// Strs writes a slice of strings: its length, then the elements.
func (e *Encoder) Strs(v []string) {
	e.Int(len(v))
	for _, s := range v {
		e.Str(s)
	}
}

// Floatss writes a slice of float slices: its length, then the elements.
func (e *Encoder) Floatss(v [][]float64) {
	e.Int(len(v))
	for _, x := range v {
		e.Floats(x)
	}
}

// Fail records err as the encoding's error (unless one is already recorded), for a posterior
// that cannot be encoded.
func (e *Encoder) Fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// section returns what write encodes, as a byte string for a length-prefixed section.
func section(write func(e *Encoder)) (string, error) {
	var buf bytes.Buffer
	sub := &Encoder{w: &buf}
	write(sub)
	return buf.String(), sub.err
}

// common writes the fields every model has, in the order of both body versions.
func (e *Encoder) common(m *Model) {
	e.Int(m.Version)
	e.Str(m.Method)
	e.Str(m.Kernel)
	e.Int(m.D)
	e.Strs(m.Columns)
	e.Str(m.Target)
	e.Floats(m.Transform.XMean)
	e.Floats(m.Transform.XScale)
	e.Float(m.Transform.YMean)
	e.Float(m.Transform.YScale)
	e.Floats(m.Hyper.Lengthscales)
	e.Float(m.Hyper.SignalVariance)
	e.Float(m.Hyper.NoiseVariance)
	e.Float(m.LogLik)
	e.Floats(m.Trace)
	e.Int(m.Iterations)
	e.Int(m.NTrain)
}

// model writes the body: the common fields, the posterior and the tagged sections.
func (e *Encoder) model(m *Model) {
	if m.Posterior == nil {
		e.Fail(errors.New("the model has no posterior"))
		return
	}
	name := m.Posterior.Name()
	if _, ok := lookupPosterior(name); !ok {
		e.Fail(fmt.Errorf("posterior %q is not registered (model.RegisterPosterior)", name))
		return
	}
	e.common(m)
	e.Str(name)
	payload, err := section(m.Posterior.Encode)
	if err != nil {
		e.Fail(fmt.Errorf("%s posterior: %w", name, err))
		return
	}
	e.Str(payload)
	e.extensions(m)
}

// extension is an optional tagged section of the model encoding, written after the
// posterior. New optional data common to all models goes here, one entry per tag, so that
// sections added independently never depend on each other's order and models written before
// a tag existed still decode.
type extension struct {
	tag     string
	present func(m *Model) bool
	encode  func(e *Encoder, m *Model)
	decode  func(d *Decoder, m *Model)
}

// extensions lists the tagged sections in the order they are written. Each tag appears at
// most once in an encoding, in this order.
func extensions() []extension {
	return []extension{
		{
			tag:     "warnings",
			present: func(m *Model) bool { return len(m.Warnings) > 0 },
			encode: func(e *Encoder, m *Model) {
				e.Int(len(m.Warnings))
				for _, w := range m.Warnings {
					e.Str(w.Code)
					e.Str(w.Message)
				}
			},
			decode: func(d *Decoder, m *Model) {
				n := d.Length(16)
				for i := 0; i < n && d.err == nil; i++ {
					m.Warnings = append(m.Warnings, Warning{Code: d.Str(), Message: d.Str()})
				}
			},
		},
		{
			tag:     "loglik_se",
			present: func(m *Model) bool { return m.LogLikSE != 0 },
			encode:  func(e *Encoder, m *Model) { e.Float(m.LogLikSE) },
			decode:  func(d *Decoder, m *Model) { m.LogLikSE = d.Float() },
		},
		{
			tag:     "domain",
			present: func(m *Model) bool { return m.Domain != nil },
			encode:  func(e *Encoder, m *Model) { e.Floats(m.Domain.Lo); e.Floats(m.Domain.Hi) },
			decode:  func(d *Decoder, m *Model) { m.Domain = &Domain{Lo: d.Floats(), Hi: d.Floats()} },
		},
		{
			tag:     "sizing",
			present: func(m *Model) bool { return m.Sizing != nil },
			encode:  func(e *Encoder, m *Model) { e.Floats(m.Sizing.LengthscaleMin); e.Floats(m.Sizing.LengthscaleMax) },
			decode: func(d *Decoder, m *Model) {
				m.Sizing = &Sizing{LengthscaleMin: d.Floats(), LengthscaleMax: d.Floats()}
			},
		},
		{
			tag:     "method_choice",
			present: func(m *Model) bool { return m.Choice != nil },
			encode:  func(e *Encoder, m *Model) { e.Str(m.Choice.Requested); e.Str(m.Choice.Reason) },
			decode:  func(d *Decoder, m *Model) { m.Choice = &MethodChoice{Requested: d.Str(), Reason: d.Str()} },
		},
		{
			tag:     "kernel_choice",
			present: func(m *Model) bool { return m.KernelReason != "" },
			encode:  func(e *Encoder, m *Model) { e.Str(m.KernelReason) },
			decode:  func(d *Decoder, m *Model) { m.KernelReason = d.Str() },
		},
		{
			tag:     "train_box",
			present: func(m *Model) bool { return m.TrainBox != nil },
			encode:  func(e *Encoder, m *Model) { e.Floats(m.TrainBox.Lo); e.Floats(m.TrainBox.Hi) },
			decode:  func(d *Decoder, m *Model) { m.TrainBox = &Domain{Lo: d.Floats(), Hi: d.Floats()} },
		},
	}
}

// extensions writes the tagged sections: their count (possibly 0), then per present section
// its tag and its payload as a length-prefixed byte string.
func (e *Encoder) extensions(m *Model) {
	var present []extension
	for _, x := range extensions() {
		if x.present(m) {
			present = append(present, x)
		}
	}
	e.Int(len(present))
	for _, x := range present {
		e.Str(x.tag)
		payload, err := section(func(sub *Encoder) { x.encode(sub, m) })
		e.Fail(err)
		e.Str(payload)
	}
}

// Decoder reads what Encoder wrote. Every length is checked against the bytes that remain,
// so corrupt input fails with an error instead of a huge allocation or a panic. After the
// first error every read returns the zero value; the caller checks the error once at the
// end.
type Decoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated or corrupt model")

func (d *Decoder) u64() uint64 {
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

// Int reads an integer; one outside the int32 range is an error.
func (d *Decoder) Int() int {
	v := int64(d.u64())
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail(fmt.Errorf("%w: integer %d out of range", errTruncated, v))
		return 0
	}
	return int(v)
}

// Float reads a float64.
func (d *Decoder) Float() float64 { return math.Float64frombits(d.u64()) }

// Bool reads a presence flag; anything but 0 or 1 is an error.
func (d *Decoder) Bool() bool {
	switch d.u64() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail(fmt.Errorf("%w: bad presence flag", errTruncated))
	return false
}

// Length reads a length whose elements take at least size bytes each; one longer than the
// remaining bytes allow is an error.
func (d *Decoder) Length(size int) int {
	n := d.Int()
	if n < 0 || n*size > len(d.b) {
		d.Fail(fmt.Errorf("%w: length %d exceeds the remaining %d bytes", errTruncated, n, len(d.b)))
		return 0
	}
	return n
}

// Str reads a string.
func (d *Decoder) Str() string {
	n := d.Length(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Floats reads a slice of floats (nil when empty).
func (d *Decoder) Floats() []float64 {
	n := d.Length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = d.Float()
	}
	return v
}

// Ints reads a slice of integers (nil when empty).
func (d *Decoder) Ints() []int {
	n := d.Length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = d.Int()
	}
	return v
}

// Floatss reads a slice of float slices (nil when empty).
func (d *Decoder) Floatss() [][]float64 {
	n := d.Length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([][]float64, n)
	for i := range v {
		v[i] = d.Floats()
	}
	return v
}

// Strs reads a slice of strings (nil when empty).
func (d *Decoder) Strs() []string {
	n := d.Length(8)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.Str()
	}
	return v
}

// Fail records err as the decoding's error (unless one is already recorded), for a section
// whose values are inconsistent in a way the reads cannot see.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Err returns the first error of the decoding, nil if none.
func (d *Decoder) Err() error { return d.err }

// common reads the fields every model has.
func (d *Decoder) common(m *Model) {
	m.Version = d.Int()
	m.Method = d.Str()
	m.Kernel = d.Str()
	m.D = d.Int()
	m.Columns = d.Strs()
	m.Target = d.Str()
	m.Transform.XMean = d.Floats()
	m.Transform.XScale = d.Floats()
	m.Transform.YMean = d.Float()
	m.Transform.YScale = d.Float()
	m.Hyper.Lengthscales = d.Floats()
	m.Hyper.SignalVariance = d.Float()
	m.Hyper.NoiseVariance = d.Float()
	m.LogLik = d.Float()
	m.Trace = d.Floats()
	m.Iterations = d.Int()
	m.NTrain = d.Int()
}

// model reads a body of either version. A Version-1 body is read into the same model a
// Version-2 body would give, with Version set to Version.
func (d *Decoder) model() *Model {
	m := &Model{}
	d.common(m)
	if d.err != nil {
		return m
	}
	switch m.Version {
	case Version:
		d.posterior(m)
		d.sections(m, d.Length(8))
	case version1:
		d.modelV1(m)
		m.Version = Version
	default:
		d.err = fmt.Errorf("model version %d; this build reads versions %d and %d: use a gpreduce build that wrote it, or retrain",
			m.Version, version1, Version)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the end of the model", errTruncated, len(d.b))
	}
	return m
}

// posterior reads the posterior's name and section through the registered decoder, which
// must read the section exactly.
func (d *Decoder) posterior(m *Model) {
	name := d.Str()
	payload := d.Str()
	if d.err != nil {
		return
	}
	dec, ok := lookupPosterior(name)
	if !ok {
		d.err = fmt.Errorf("%w: unknown posterior %q (written by a newer build?); this build reads %v", errTruncated, name, PosteriorNames())
		return
	}
	sub := &Decoder{b: []byte(payload)}
	p := dec(sub)
	switch {
	case sub.err != nil:
		d.err = fmt.Errorf("%s posterior: %w", name, sub.err)
	case len(sub.b) != 0:
		d.err = fmt.Errorf("%w: %d bytes after the %s posterior", errTruncated, len(sub.b), name)
	case p == nil || p.Name() != name:
		d.err = fmt.Errorf("%w: the %s posterior's decoder returned another posterior", errTruncated, name)
	default:
		m.Posterior = p
	}
}

// sections reads n tagged sections written by Encoder.extensions. Tags must be known to this
// build, appear once each and in the encoder's order, and each payload must be read exactly,
// so every accepted model encodes back to the bytes it was read from.
func (d *Decoder) sections(m *Model, n int) {
	known := extensions()
	next := 0
	for i := 0; i < n && d.err == nil; i++ {
		tag := d.Str()
		payload := d.Str()
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
		sub := &Decoder{b: []byte(payload)}
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

// kernel writes a kernel: its family, lengthscales and signal variance.
func (e *Encoder) kernel(k kernel.Kernel) {
	e.Int(int(k.Family))
	e.Floats(k.Lengthscales)
	e.Float(k.SignalVariance)
}

// kernel reads a kernel as Encoder.kernel writes it.
func (d *Decoder) kernel() kernel.Kernel {
	var k kernel.Kernel
	k.Family = kernel.Family(d.Int())
	k.Lengthscales = d.Floats()
	k.SignalVariance = d.Float()
	return k
}
