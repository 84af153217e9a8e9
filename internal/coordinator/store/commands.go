package store

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"time"
)

// A command is one raft log entry: a one-byte op tag followed by the gob encoding of the op's
// payload struct. Times in commands are stamped by the proposing leader, so applying the log
// gives the same state on every member and on every replay.
type op byte

// The command types. Each has one entry in commands; the values are in the log, so they
// never change.
const (
	opSubmit op = iota + 1
	opSetState
	opCheckpoint
	opModelChunk
	opModelCommit
	opCancel
	opMember
	opDelete
	opEvents
	opCount // one past the last command type
)

// String returns the command type's name ("submit", ...).
func (o op) String() string {
	if o < opCount && commands[o].name != "" {
		return commands[o].name
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

type submitCmd struct {
	ID   string
	Spec []byte
	Time time.Time
}

type setStateCmd struct {
	ID    string
	State JobState
	Error string
	// Message is the text of the state's event ("started", ...); Error if empty.
	Message string
	Time    time.Time
}

// checkpointCmd replaces the job's checkpoint: by the bytes in Checkpoint (a small one), or
// by the chunks of upload Upload (Chunks chunks, Size bytes, sha256 SHA256).
type checkpointCmd struct {
	ID         string
	Iteration  int
	Objective  float64
	Checkpoint []byte
	Upload     uint64
	Chunks     int
	Size       int64
	SHA256     string
	Time       time.Time
}

// deleteCmd removes finished jobs with their models, checkpoints and events. Retention
// deletes skip the jobs that are gone or not finished.
type deleteCmd struct {
	IDs       []string
	Retention bool
	Time      time.Time
}

// eventsCmd records progress events.
type eventsCmd struct {
	Events []Event
}

// modelChunkCmd carries chunk Seq of a model or checkpoint upload. Chunk 0 starts the
// upload; later chunks name it by Upload, the ID that chunk 0's Apply returned.
type modelChunkCmd struct {
	ID     string
	Upload uint64
	Seq    int
	Data   []byte
}

type modelCommitCmd struct {
	ID      string
	Upload  uint64
	Chunks  int
	Size    int64
	SHA256  string
	Metrics []byte
	Time    time.Time
}

type cancelCmd struct {
	ID   string
	Time time.Time
}

// memberCmd records (or, with Remove, forgets) the API address of coordinator ID.
type memberCmd struct {
	ID      string
	APIAddr string
	Remove  bool
}

// encodeCommand returns the log entry for payload under tag o.
func encodeCommand(o op, payload any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(o))
	if err := gob.NewEncoder(&buf).Encode(payload); err != nil {
		return nil, fmt.Errorf("encode %s command: %w", o, err)
	}
	return buf.Bytes(), nil
}

func decodeCommand[T any](o op, data []byte) (T, error) {
	var c T
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return c, fmt.Errorf("decode %s command: %w", o, err)
	}
	return c, nil
}

// applyFunc applies the payload body of the command at raft index index to f's state; for
// model chunks it returns the upload ID.
type applyFunc func(f *fsm, index uint64, body []byte) (upload uint64, err error)

// command is one command type: its name and how it is applied.
type command struct {
	name  string
	apply applyFunc
}

// commands is the FSM's dispatch table, one entry per command type, indexed by op. It is
// read-only.
var commands = [opCount]command{
	opSubmit:      {"submit", stateCmd(opSubmit, (*state).submit)},
	opSetState:    {"set-state", stateCmd(opSetState, (*state).setState)},
	opCheckpoint:  {"checkpoint", stateCmd(opCheckpoint, (*state).checkpoint)},
	opModelChunk:  {"model-chunk", applyModelChunk},
	opModelCommit: {"model-commit", stateCmd(opModelCommit, (*state).modelCommit)},
	opCancel:      {"cancel", stateCmd(opCancel, (*state).cancel)},
	opMember:      {"member", stateCmd(opMember, (*state).member)},
	opDelete:      {"delete", stateCmd(opDelete, (*state).deleteJobs)},
	opEvents:      {"events", stateCmd(opEvents, (*state).appendEvents)},
}

// stateCmd is the applyFunc of a command whose payload is a T applied by fn.
func stateCmd[T any](o op, fn func(*state, T) error) applyFunc {
	return func(f *fsm, _ uint64, body []byte) (uint64, error) {
		return 0, applyCmd(f, o, body, fn)
	}
}

// applyModelChunk applies a model chunk, which needs its log index (the ID of an upload its
// proposer did not name) and returns the upload ID.
func applyModelChunk(f *fsm, index uint64, body []byte) (upload uint64, err error) {
	err = applyCmd(f, opModelChunk, body, func(s *state, c modelChunkCmd) (err error) {
		upload, err = s.modelChunk(index, c)
		return err
	})
	return upload, err
}

// applyCmd decodes a command of type T and applies it with fn under the lock. Decoding
// happens outside the lock: payloads can be large.
func applyCmd[T any](f *fsm, o op, body []byte, fn func(*state, T) error) error {
	c, err := decodeCommand[T](o, body)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn(f.st, c)
}
