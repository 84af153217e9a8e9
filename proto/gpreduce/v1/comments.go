package gpreducev1

import (
	_ "embed"
	"regexp"
	"strings"
)

// coordinatorProto is the source of coordinator.proto. Comments are not in the compiled
// descriptors, so the CLI's flag help (the comments of the settings messages' fields) is
// read from the embedded source.
//
//go:embed coordinator.proto
var coordinatorProto string

// fieldComments maps "Message.field" to the comment above the field in coordinator.proto,
// its lines joined by spaces. Built once at init and read-only after.
var fieldComments = parseFieldComments(coordinatorProto)

var (
	messageLine = regexp.MustCompile(`^message\s+(\w+)\s*\{`)
	fieldLine   = regexp.MustCompile(`^(?:repeated\s+|optional\s+)?[\w.]+\s+(\w+)\s*=\s*\d+`)
)

// parseFieldComments reads the comment block directly above each field of each top-level
// message of a .proto source.
func parseFieldComments(src string) map[string]string {
	out := map[string]string{}
	msg := ""
	var comment []string
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "//"):
			comment = append(comment, strings.TrimSpace(strings.TrimPrefix(t, "//")))
			continue
		case messageLine.MatchString(t):
			msg = messageLine.FindStringSubmatch(t)[1]
		case t == "}" && !strings.HasPrefix(line, " "):
			msg = ""
		case msg != "" && fieldLine.MatchString(t):
			if len(comment) > 0 {
				out[msg+"."+fieldLine.FindStringSubmatch(t)[1]] = strings.Join(comment, " ")
			}
		}
		comment = nil
	}
	return out
}

// FieldComment returns the comment above field (its proto name) of message (its short
// name, e.g. "CGSettings") in coordinator.proto, joined into one line, or "" if it has none.
func FieldComment(message, field string) string {
	return fieldComments[message+"."+field]
}
