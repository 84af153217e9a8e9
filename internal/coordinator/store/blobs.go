package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// blobStore keeps the large values of the replicated state (models and checkpoints) as files
// named by the hex sha256 of their bytes, outside the raft log and outside memory. The
// state holds only the hash and the size. The FSM writes a blob when a command that
// references it is applied (the bytes arrive in chunked raft commands, which log compaction
// drops), deletes it when the last reference goes, and rebuilds the whole directory from
// each snapshot it restores, so every member can serve every blob the state references.
//
// Snapshots name the blobs without their bytes, so the directory survives restarts; a
// member that lacks a blob fetches it from another (see fsm.blob).
type blobStore struct {
	dir string
}

// newBlobStore returns a store over dir (created if needed), dropping temporary files an
// interrupted write left.
func newBlobStore(dir string) (*blobStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "tmp-*"))
	for _, t := range tmps {
		_ = os.Remove(t)
	}
	return &blobStore{dir: dir}, nil
}

// BlobHash is the hex sha256 of b, the name of its blob (and the hash Job.ModelHash and
// Job.CheckpointHash hold).
func BlobHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (s *blobStore) path(hash string) string { return filepath.Join(s.dir, hash) }

// put stores data under hash (its sha256, checked by the caller) unless a blob of that
// size is already there. The write goes through a temporary file and a rename, so a blob
// is either whole or absent.
func (s *blobStore) put(hash string, data []byte) error {
	if fi, err := os.Stat(s.path(hash)); err == nil && fi.Size() == int64(len(data)) {
		return nil
	}
	return s.write(hash, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// putStream stores the size bytes read from r under hash, checking their sha256.
func (s *blobStore) putStream(hash string, size int64, r io.Reader) error {
	return s.write(hash, func(w io.Writer) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, size))
		switch {
		case err != nil:
			return err
		case n != size:
			return fmt.Errorf("got %d of %d bytes", n, size)
		case hex.EncodeToString(h.Sum(nil)) != hash:
			return fmt.Errorf("sha256 mismatch")
		}
		return nil
	})
}

// write stores what fill writes under hash through a temporary file and a rename, so a
// blob is either whole or absent; on any error the temporary file is removed.
func (s *blobStore) write(hash string, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(s.dir, "tmp-*")
	if err != nil {
		return fmt.Errorf("write blob %s: %w", hash, err)
	}
	ferr := fill(tmp)
	if err := errors.Join(ferr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write blob %s: %w", hash, err)
	}
	if err := os.Rename(tmp.Name(), s.path(hash)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write blob %s: %w", hash, err)
	}
	return nil
}

// get returns the bytes of blob hash, checking their size and sha256.
func (s *blobStore) get(hash string, size int64) ([]byte, error) {
	b, err := os.ReadFile(s.path(hash))
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", hash, err)
	}
	if int64(len(b)) != size || BlobHash(b) != hash {
		return nil, fmt.Errorf("read blob %s: %d bytes on disk do not match the recorded size %d and sha256", hash, len(b), size)
	}
	return b, nil
}

// remove deletes blob hash; a missing blob is not an error.
func (s *blobStore) remove(hash string) error {
	if err := os.Remove(s.path(hash)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove blob %s: %w", hash, err)
	}
	return nil
}
