package scenario

import (
	"bytes"
	"fmt"
)

// Archive is a parsed txtar file: a comment, then named files.
type Archive struct {
	Comment []byte
	Files   []File
}

// File is one member of an archive.
type File struct {
	Name string
	Data []byte
}

// ParseArchive parses the txtar format: "-- NAME --" lines separate files;
// the text before the first is the comment. A file's data ends with a
// newline unless it is empty.
func ParseArchive(data []byte) (*Archive, error) {
	a := &Archive{}
	var cur *File
	var buf bytes.Buffer
	flush := func() {
		if cur == nil {
			a.Comment = append([]byte(nil), buf.Bytes()...)
		} else {
			cur.Data = append([]byte(nil), buf.Bytes()...)
			a.Files = append(a.Files, *cur)
		}
		buf.Reset()
	}
	seen := map[string]bool{}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if name, ok := fileMarker(line); ok {
			if seen[name] {
				return nil, fmt.Errorf("scenario: file %q appears twice", name)
			}
			seen[name] = true
			flush()
			cur = &File{Name: name}
			continue
		}
		buf.Write(line)
		if line[len(line)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	flush()
	return a, nil
}

// fileMarker reports whether line is "-- NAME --" and returns NAME.
func fileMarker(line []byte) (string, bool) {
	line = bytes.TrimRight(line, "\r\n")
	if !bytes.HasPrefix(line, []byte("-- ")) || !bytes.HasSuffix(line, []byte(" --")) || len(line) < 7 {
		return "", false
	}
	name := bytes.TrimSpace(line[3 : len(line)-3])
	if len(name) == 0 {
		return "", false
	}
	return string(name), true
}

// File returns the named member's data.
func (a *Archive) File(name string) ([]byte, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}
