package project

import (
	"strconv"
	"strings"
)

// maxNameNumber bounds the numbers tried when a name is taken or templated.
const maxNameNumber = 1_000_000

// allocateName applies GNS3's node naming rules:
//
//  1. every space is removed;
//  2. a name containing "{0}" or "{id}" is a template: the first number
//     from 1 that gives a free name is substituted ("{name}" becomes "Node");
//  3. otherwise a free name is kept, and a taken one gets its trailing
//     number replaced, or a number appended, by the first that is free:
//     "R1" taken gives "R2", "R" taken gives "R1".
//
// The requested name and the name given must both pass CheckName.
func allocateName(requested string, taken func(string) bool) (string, error) {
	if err := CheckName("Node name", requested); err != nil {
		return "", err
	}
	name, err := allocate(requested, taken)
	if err != nil {
		return "", err
	}
	if err := CheckName("Node name", name); err != nil {
		return "", err
	}
	return name, nil
}

func allocate(requested string, taken func(string) bool) (string, error) {
	name := strings.ReplaceAll(requested, " ", "")
	if strings.Contains(name, "{0}") || strings.Contains(name, "{id}") {
		tmpl := strings.ReplaceAll(name, "{name}", "Node")
		probe := strings.NewReplacer("{0}", "", "{id}", "").Replace(tmpl)
		if strings.ContainsAny(probe, "{}") {
			return "", errorf(ErrConflict, "Invalid node name format: %s", requested)
		}
		for i := 1; i < maxNameNumber; i++ {
			n := strconv.Itoa(i)
			candidate := strings.NewReplacer("{0}", n, "{id}", n).Replace(tmpl)
			if !taken(candidate) {
				return candidate, nil
			}
		}
		return "", errorf(ErrConflict, "A node name could not be allocated (node limit reached?)")
	}
	if name == "" {
		return "", errorf(ErrInvalid, "Node name cannot be empty")
	}
	if !taken(name) {
		return name, nil
	}
	base := strings.TrimRight(name, "0123456789")
	for i := 1; i < maxNameNumber; i++ {
		candidate := base + strconv.Itoa(i)
		if !taken(candidate) {
			return candidate, nil
		}
	}
	return "", errorf(ErrConflict, "A node name could not be allocated (node limit reached?)")
}
