package store

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// hclogAdapter implements hclog.Logger on a zerolog.Logger so that raft, its transport and
// its snapshot store log through the coordinator's logger. The hclog name goes into the
// "logger" field and hclog's key/value arguments become fields.
type hclogAdapter struct {
	zl      zerolog.Logger
	name    string
	implied []any
	// level is an extra hclog level floor set by SetLevel (hclog.NoLevel: none). It is shared
	// with loggers derived by With and Named, as hclog does.
	level *atomic.Int32
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHclogAdapter(zl zerolog.Logger, name string) *hclogAdapter {
	return &hclogAdapter{zl: zl, name: name, level: new(atomic.Int32)}
}

func zerologLevel(l hclog.Level) zerolog.Level {
	switch l {
	case hclog.Trace:
		return zerolog.TraceLevel
	case hclog.Debug:
		return zerolog.DebugLevel
	case hclog.NoLevel, hclog.Info:
		return zerolog.InfoLevel
	case hclog.Warn:
		return zerolog.WarnLevel
	case hclog.Error:
		return zerolog.ErrorLevel
	default:
		return zerolog.Disabled
	}
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	if floor := hclog.Level(a.level.Load()); floor != hclog.NoLevel && l < floor {
		return false
	}
	zlvl := zerologLevel(l)
	return zlvl != zerolog.Disabled && zlvl >= a.zl.GetLevel() && zlvl >= zerolog.GlobalLevel()
}

// Log emits msg at level with key/value args.
func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if !a.enabled(level) {
		return
	}
	ev := a.zl.WithLevel(zerologLevel(level))
	if a.name != "" {
		ev = ev.Str("logger", a.name)
	}
	addFields(ev, a.implied)
	addFields(ev, args)
	ev.Msg(msg)
}

// addFields adds hclog-style alternating key/value pairs to ev. A trailing key without a
// value is logged under "EXTRA_VALUE_AT_END", as hclog does.
func addFields(ev *zerolog.Event, kv []any) {
	for i := 0; i < len(kv); i += 2 {
		if i+1 == len(kv) {
			ev.Interface("EXTRA_VALUE_AT_END", kv[i])
			break
		}
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		switch v := kv[i+1].(type) {
		case error:
			ev.AnErr(key, v)
		case string:
			ev.Str(key, v)
		case fmt.Stringer:
			ev.Stringer(key, v)
		case hclog.Format:
			ev.Str(key, fmt.Sprintf(fmt.Sprint(v[0]), v[1:]...))
		default:
			ev.Interface(key, v)
		}
	}
}

// Trace logs at trace level.
func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }

// Debug logs at debug level.
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }

// Info logs at info level.
func (a *hclogAdapter) Info(msg string, args ...any) { a.Log(hclog.Info, msg, args...) }

// Warn logs at warn level.
func (a *hclogAdapter) Warn(msg string, args ...any) { a.Log(hclog.Warn, msg, args...) }

// Error logs at error level.
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

// IsTrace reports whether trace messages are logged.
func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug reports whether debug messages are logged.
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo reports whether info messages are logged.
func (a *hclogAdapter) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn reports whether warnings are logged.
func (a *hclogAdapter) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError reports whether errors are logged.
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs returns the key/value pairs added by With.
func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

// With returns a logger that adds args to every message.
func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any(nil), a.implied...), args...)
	return &c
}

// Name returns the logger's name.
func (a *hclogAdapter) Name() string { return a.name }

// Named returns a logger whose name is this one's with name appended.
func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

// ResetNamed returns a logger with the given name.
func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel sets a minimum hclog level on top of the zerolog logger's level.
func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

// GetLevel returns the effective level.
func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger returns a standard library logger writing through this logger.
func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that logs each line written to it.
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdWriter{a: a, infer: opts.InferLevels || opts.InferLevelsWithTimestamp, force: opts.ForceLevel}
}

// stdWriter adapts standard-library log output: one message per line, with the level taken
// from a "[ERROR]"-style prefix when inference is on.
type stdWriter struct {
	a     *hclogAdapter
	infer bool
	force hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\r\n"), []byte("\n")) {
		msg := string(line)
		level := hclog.Info
		if w.force != hclog.NoLevel {
			level = w.force
		} else if w.infer {
			level, msg = inferLevel(msg)
		}
		w.a.Log(level, msg)
	}
	return len(p), nil
}

func inferLevel(msg string) (hclog.Level, string) {
	prefixes := []struct {
		p string
		l hclog.Level
	}{
		{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
		{"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error},
	}
	for _, p := range prefixes {
		if i := strings.Index(msg, p.p); i >= 0 {
			return p.l, strings.TrimSpace(msg[i+len(p.p):])
		}
	}
	return hclog.Info, msg
}
