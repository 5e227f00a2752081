package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// applyDockerfile fills s from the final stage of a Dockerfile, so the image
// built here and the one `docker build` makes from that file agree: the COPY
// destination of the binary, USER, EXPOSE, LABEL, ENTRYPOINT and CMD (exec
// form). Any other instruction in the final stage is an error, so the two
// cannot drift apart silently.
func applyDockerfile(s *spec, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read Dockerfile: %w", err)
	}
	instrs := dockerfileInstructions(string(b))
	last := -1
	for i, in := range instrs {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last < 0 {
		return fmt.Errorf("%s: no FROM instruction", file)
	}
	for _, in := range instrs[last+1:] {
		where := fmt.Sprintf("%s:%d", file, in.line)
		switch in.cmd {
		case "COPY":
			f := strings.Fields(in.args)
			var paths []string
			for _, a := range f {
				if !strings.HasPrefix(a, "--") {
					paths = append(paths, a)
				}
			}
			if len(paths) != 2 {
				return fmt.Errorf("%s: COPY: want one source and one destination, got %q", where, in.args)
			}
			s.Path = paths[1]
		case "USER":
			s.User = strings.TrimSpace(in.args)
		case "EXPOSE":
			s.Ports = append(s.Ports, strings.Fields(in.args)...)
		case "LABEL":
			kvs, err := labelPairs(in.args)
			if err != nil {
				return fmt.Errorf("%s: LABEL: %w", where, err)
			}
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			for k, v := range kvs {
				s.Labels[k] = v
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(in.args), &list); err != nil {
				return fmt.Errorf("%s: %s must use the exec form [\"...\"]: %w", where, in.cmd, err)
			}
			if in.cmd == "ENTRYPOINT" {
				s.Entrypoint = list
			} else {
				s.Cmd = list
			}
		default:
			return fmt.Errorf("%s: %s in the final stage is not supported by imagebuild", where, in.cmd)
		}
	}
	if s.Path == "" {
		return fmt.Errorf("%s: the final stage has no COPY of the binary", file)
	}
	return nil
}

type instruction struct {
	line int    // first line, 1-based
	cmd  string // upper case
	args string
}

// dockerfileInstructions splits a Dockerfile into instructions, joining
// continuation lines and dropping comments and blank lines.
func dockerfileInstructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		cont := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		if cont {
			cur.WriteString(" ")
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// labelPairs parses LABEL's key=value list; values may be double-quoted.
func labelPairs(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \t") {
			return nil, fmt.Errorf("want key=value in %q", s)
		}
		key := s[:eq]
		s = s[eq+1:]
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quote in the value of %s", key)
			}
			s = s[i+1:]
		} else {
			end := strings.IndexAny(s, " \t")
			if end < 0 {
				end = len(s)
			}
			val.WriteString(s[:end])
			s = s[end:]
		}
		out[key] = val.String()
	}
	return out, nil
}
