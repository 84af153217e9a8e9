package train

import (
	"math"
	"strings"
	"testing"

	"github.com/gpreduce/gpreduce/internal/model"
)

// TestWarnLOO: residuals whose standardized mean square is 1 give no warning; too large or
// too small a mean square beyond the band warns with the side and the factor; fewer than
// looMinRows rows are not judged; the band narrows with n.
func TestWarnLOO(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		z    float64 // every standardized residual is +-z
		want string  // "" for no warning, else a substring of the message
	}{
		{"calibrated", 300, 1, ""},
		{"inside the band", 300, math.Sqrt(1.3), ""},
		{"too narrow", 300, math.Sqrt(1.5), "too narrow (by about 1.2x"},
		{"too wide", 300, 0.5, "too wide (by about 2x"},
		{"few rows", looMinRows - 1, 3, ""},
		{"large n, small excess", 100000, math.Sqrt(1.2), ""},
		{"large n, band floor", 100000, math.Sqrt(1.26), "too narrow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resid, variance := make([]float64, c.n), make([]float64, c.n)
			for i := range resid {
				variance[i] = 0.1 + float64(i%7) // the check is per row's own scale
				resid[i] = c.z * math.Sqrt(variance[i])
				if i%2 == 1 {
					resid[i] = -resid[i]
				}
			}
			var m model.Model
			warnLOO(&m, resid, variance)
			switch {
			case c.want == "" && len(m.Warnings) != 0:
				t.Errorf("unexpected warning %v", m.Warnings)
			case c.want != "" && (len(m.Warnings) != 1 || m.Warnings[0].Code != model.WarnCalibration || !strings.Contains(m.Warnings[0].Message, c.want)):
				t.Errorf("warnings %v, want one %s containing %q", m.Warnings, model.WarnCalibration, c.want)
			}
		})
	}
	if b := looBand(277); !(math.Abs(b-4*math.Sqrt(2.0/277)) < 1e-15) {
		t.Errorf("looBand(277) = %v", b)
	}
}
