package model

import (
	"fmt"

	"github.com/gpreduce/gpreduce/internal/solver"
)

// version1 is the body layout before posteriors were registered: after the common fields, a
// fixed sequence of per-method groups, each behind a presence flag (GL map, RFF map, feature
// posterior, exact posterior), then the optional GRIEF and expansion sections and the tagged
// trailer. Decode still reads it; Encode writes Version only.
const version1 = 1

// modelV1 reads the rest of a Version-1 body after the common fields into m: its groups
// become the one posterior they describe. It accepts exactly the bodies the Version-1 encoder
// wrote (every other false flag or empty trailer is corrupt), and refuses combinations of
// groups that are not one posterior.
func (d *Decoder) modelV1(m *Model) {
	var (
		gl        *GLParams
		rff       *RFFParams
		feat      *solver.FeaturePredictor
		exact     *solver.ExactPredictor
		griefMap  *GRIEFParams
		griefPost *GRIEFPost
		expansion *solver.ExpansionPredictor
	)
	if d.Bool() {
		gl = &GLParams{U: d.Floats(), NodesPerDim: d.Ints()}
	}
	if d.Bool() {
		rff = &RFFParams{Omega: d.Floats(), Features: d.Int()}
	}
	if d.Bool() {
		feat = decodeFeaturePredictor(d)
	}
	if d.Bool() {
		exact = decodeExactPredictor(d)
	}
	// The trailing GRIEF and expansion sections are optional: a model may end before either.
	// The encoder wrote a false presence flag only for an absent GRIEF section directly
	// before an expansion or a trailer, and absent flags for both before a trailer.
	griefAbsent := false
	if d.err == nil && len(d.b) != 0 {
		if d.Bool() {
			griefMap = decodeGRIEFParams(d)
			if d.Bool() {
				griefPost = decodeGRIEFPost(d)
			}
		} else {
			griefAbsent = true
		}
	}
	if d.err == nil && (griefAbsent || len(d.b) != 0) {
		if d.Bool() {
			expansion = decodeExpansionPredictor(d)
		} else if d.err == nil && len(d.b) == 0 {
			d.err = fmt.Errorf("%w: an absent optional section written out", errTruncated)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		n := d.Length(8)
		if d.err == nil && n == 0 {
			d.err = fmt.Errorf("%w: an empty extension trailer", errTruncated)
		}
		d.sections(m, n)
	}
	if d.err != nil {
		return
	}
	var posts []Posterior
	if (gl != nil || rff != nil) != (feat != nil) {
		d.err = fmt.Errorf("a feature map needs a feature posterior and the other way round")
		return
	}
	if feat != nil {
		switch {
		case gl != nil && rff == nil:
			posts = append(posts, &GLPosterior{Map: *gl, Features: feat})
		case rff != nil && gl == nil:
			posts = append(posts, &RFFPosterior{Map: *rff, Features: feat})
		default:
			d.err = fmt.Errorf("feature posterior needs exactly one feature map")
			return
		}
	}
	if exact != nil {
		posts = append(posts, &ExactPosterior{Exact: exact})
	}
	if (griefMap != nil) != (griefPost != nil) {
		d.err = fmt.Errorf("a GRIEF map needs a GRIEF posterior and the other way round")
		return
	}
	if griefMap != nil {
		posts = append(posts, &GRIEFPosterior{Map: *griefMap, Post: griefPost})
	}
	if expansion != nil {
		posts = append(posts, &ExpansionPosterior{Expansion: expansion})
	}
	if len(posts) != 1 {
		d.err = fmt.Errorf("model has %d posteriors, want 1", len(posts))
		return
	}
	m.Posterior = posts[0]
}
