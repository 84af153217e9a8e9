package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gpreduce/gpreduce/internal/train"
)

// progress shows training events. On a terminal it redraws one status line: a bar with the
// elapsed time and an estimate of the time left for phases that count iterations (start
// search restarts, optimizer iterations, MCMC samples), and the elapsed time of the running
// phase for the others (fit, predict, data passes); a phase's message lines stay above it.
// Otherwise it writes one line per event (of iteration events, every tenth, to keep logs
// short).
type progress struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	now func() time.Time

	open       bool // a status line is drawn on the current line
	phase      string
	phaseStart time.Time
	iterBase   int       // the phase's first iteration event's iteration (-1: none yet)
	iterStart  time.Time // and when it came
	iterEvents int       // the phase's iteration events so far
	status     func(elapsed time.Duration) string

	tick *time.Ticker
	stop chan struct{}
	wg   sync.WaitGroup
}

// tickEvery is how often the status line's elapsed time is redrawn on a terminal.
const tickEvery = time.Second

// newProgress returns a progress writing to w; tty selects the redrawn status line.
func newProgress(w io.Writer, tty bool) *progress {
	p := &progress{w: w, tty: tty, now: time.Now}
	if tty {
		p.tick, p.stop = time.NewTicker(tickEvery), make(chan struct{})
		p.wg.Go(p.ticker)
	}
	return p
}

// ticker redraws the status line with the current elapsed time until done.
func (p *progress) ticker() {
	for {
		select {
		case <-p.stop:
			return
		case <-p.tick.C:
			p.mu.Lock()
			p.redraw()
			p.mu.Unlock()
		}
	}
}

// iterative reports whether ev counts iterations of its phase rather than announcing it.
func iterative(ev train.Event) bool { return ev.MaxIter > 0 && ev.Iteration > 0 }

func (p *progress) observe(ev train.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if ev.Phase != p.phase || p.phaseStart.IsZero() {
		p.phase, p.phaseStart, p.iterBase, p.iterEvents, p.status = ev.Phase, now, -1, 0, nil
	}
	if !iterative(ev) {
		if ev.Message == "" {
			return
		}
		p.endLine()
		fmt.Fprintf(p.w, "%-9s %s\n", ev.Phase, ev.Message)
		if p.tty {
			phase := ev.Phase
			p.status = func(el time.Duration) string { return fmt.Sprintf("%-9s ... %s", phase, fmtDur(el)) }
		}
		return
	}
	if p.iterBase < 0 {
		p.iterBase, p.iterStart = ev.Iteration, now
	}
	p.iterEvents++
	if !p.tty {
		// The first, every tenth and the last event of the phase, and those with a message.
		if n := p.iterEvents; n == 1 || n%10 == 0 || ev.Iteration == ev.MaxIter || ev.Message != "" {
			fmt.Fprintf(p.w, "%-9s iteration %d/%d%s\n", ev.Phase, ev.Iteration, ev.MaxIter, detail(ev))
		}
		return
	}
	ev0, base, start := ev, p.iterBase, p.iterStart
	p.status = func(el time.Duration) string {
		const width = 30
		done := min(width, width*ev0.Iteration/ev0.MaxIter)
		line := fmt.Sprintf("%-9s [%s%s] %3d/%d%s  %s", ev0.Phase, strings.Repeat("#", done), strings.Repeat(".", width-done),
			ev0.Iteration, ev0.MaxIter, detail(ev0), fmtDur(el))
		if n := ev0.Iteration - base; n > 0 && ev0.Iteration < ev0.MaxIter {
			left := time.Duration(float64(p.now().Sub(start)) / float64(n) * float64(ev0.MaxIter-ev0.Iteration))
			bound := ""
			if ev0.Phase == "optimize" {
				bound = "<= " // the optimizer may stop before MaxIter
			}
			line += fmt.Sprintf("  eta %s%s", bound, fmtDur(left))
		}
		return line
	}
	p.redraw()
}

// detail is the objective and message of an iteration event, for its line.
func detail(ev train.Event) string {
	s := ""
	if ev.Objective != 0 {
		s += fmt.Sprintf("  -log p(y)/n = %.6f", ev.Objective)
	}
	if ev.Message != "" {
		s += "  " + ev.Message
	}
	return s
}

// redraw draws the status line, if there is one, with the phase's elapsed time.
func (p *progress) redraw() {
	if !p.tty || p.status == nil {
		return
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.status(p.now().Sub(p.phaseStart)))
	p.open = true
}

// done ends the status line and stops redrawing it.
func (p *progress) done() {
	p.mu.Lock()
	p.endLine()
	p.status = nil
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.tick.Stop()
		p.wg.Wait()
	}
}

// endLine ends a drawn status line, redrawn with the final elapsed time: it stays above
// what follows, saying how long the phase took.
func (p *progress) endLine() {
	if !p.open {
		return
	}
	p.redraw()
	fmt.Fprintln(p.w)
	p.open = false
}

// fmtDur formats a duration for the status line: 0.4s, 12s, 3m05s, 1h02m.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
