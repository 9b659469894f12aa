// Command porcupine_driver checks register histories with Porcupine, for
// replicalab's benchmarks (benchmarks/bench_linearizability.py,
// bench_check_command.py) and its agreement test (tests/test_api_porcupine.py),
// which build it in a temporary directory.
//
// Two inputs. With -edn, each further argument is a Jepsen history file as
// `replicalab export --format edn` writes it (and Jepsen does): one op map per
// line, read with an EDN library; :process an integer (others, :nemesis, are
// left out); :type :invoke, :ok, :fail or :info; :f :read, :write or :cas;
// :value a jepsen.independent [key value] tuple, value an integer or nil (a
// cas: [key [from to]]); :time in ns. An invoke is paired with the next
// completion of its process, as Jepsen does: fail never happened and is left
// out, info (or no completion) may have happened at any time after its invoke
// (Return is the largest int64), reads that did not complete ok are left out.
// Each key is one register starting at nil, checked as an independent part.
// Output: one JSON line per file, {"name", "ops", "valid", "check_ns"}.
//
// Otherwise the input is a JSON file named by the first argument:
//
//	{"repeats": 3, "timeout_s": 60, "histories": [
//	  {"name": "...", "ops": [[process, f, key, a, b, outcome, call, ret], ...]},
//	  {"name": "...", "model": "kv", "kv_ops": [{"p": 0, "f": 2, "k": "3",
//	    "v": "x 0 1 y", "out": "", "o": 0, "c": 5, "r": 9}, ...]}]}
//
// A "kv" history is Porcupine's key-value model (its kv tests): get (f 0, the value
// read in "out"), put (1) and append (2) of strings, a register per key starting at "".
//
// f is 0 read, 1 write, 2 cas; values are integers (0 is the register's
// initial nil); a read returned a, a write wrote a, a cas swapped a for b;
// a cas's a of -1 means its expected value was not recorded (legal in any state);
// outcome is 0 ok, 1 info (may have happened at any time after call, or never:
// Porcupine takes ret as the largest int64). Failed operations and reads whose
// outcome is unknown are left out by the caller, as Jepsen does.
//
// Output: one JSON line per history and repeat with, for each of Porcupine's two
// entry points, the verdict and the time of that call alone in ns (parsing and
// building the []porcupine.Operation are not timed):
//
//   - "valid", "check_ns": CheckOperationsTimeout, which returns a bool-like
//     result and stops at the first partition found not linearizable;
//   - "verbose_valid", "verbose_ns": CheckOperationsVerbose, which decides every
//     partition and computes the partial linearizations (LinearizationInfo).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
	"olympos.io/encoding/edn"
)

type input struct {
	f   int
	key int64
	a   int64
	b   int64
}

type output struct {
	value   int64
	unknown bool
}

// anyValue as a cas's expected value: the history did not record it, so the cas
// is legal in every state (it acts as a write).
const anyValue = -1

const (
	opRead  = 0
	opWrite = 1
	opCas   = 2
)

// kvModel is replicalab's kv model in Porcupine's terms: one register per key
// (the partition), its state the integer of the value last written.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int64][]porcupine.Operation{}
		var keys []int64
		for _, op := range history {
			k := op.Input.(input).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return int64(0) },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(int64)
		i := in.(input)
		o := out.(output)
		switch i.f {
		case opRead:
			return s == o.value, s
		case opWrite:
			return true, i.a
		default:
			if i.a == anyValue || s == i.a {
				return true, i.b
			}
			// a cas whose outcome is unknown may have failed its comparison
			return o.unknown, s
		}
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	Hash:  func(s interface{}) uint64 { return uint64(s.(int64)) },
}

// kvInput and kvOutput are the key-value model's (Porcupine's kv tests': get, put,
// append on strings, one register per key, a key never written reads "").
type kvInput struct {
	f     int // 0 get, 1 put, 2 append
	key   string
	value string
}

type kvOutput struct {
	value   string
	unknown bool
}

var kvAppendModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return "" },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(string)
		i := in.(kvInput)
		switch i.f {
		case 0:
			o := out.(kvOutput)
			return o.unknown || o.value == s, s
		case 1:
			return true, i.value
		default:
			return true, s + i.value
		}
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	Hash: func(s interface{}) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s.(string)))
		return h.Sum64()
	},
}

// kvOp is one op of a kv history: process, f (0 get, 1 put, 2 append), key, value
// (put, append), output (get), outcome (0 ok, 1 info), call and return.
type kvOp struct {
	P   int    `json:"p"`
	F   int    `json:"f"`
	Key string `json:"k"`
	V   string `json:"v"`
	Out string `json:"out"`
	O   int    `json:"o"`
	C   int64  `json:"c"`
	R   int64  `json:"r"`
}

type history struct {
	Name  string    `json:"name"`
	Model string    `json:"model"` // "register" (default) or "kv"
	Ops   [][]int64 `json:"ops"`
	KVOps []kvOp    `json:"kv_ops"`
}

type request struct {
	// VerboseFirst runs CheckOperationsVerbose before CheckOperationsTimeout (the
	// caller alternates it between runs, so neither always meets a cold cache)
	VerboseFirst bool      `json:"verbose_first"`
	Repeats      int       `json:"repeats"`
	TimeoutS     float64   `json:"timeout_s"`
	Histories    []history `json:"histories"`
}

func kvOperations(h history) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(h.KVOps))
	for _, r := range h.KVOps {
		out := kvOutput{value: r.Out, unknown: r.O == 1}
		ret := r.R
		if out.unknown {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: r.P,
			Input: kvInput{f: r.F, key: r.Key, value: r.V}, Call: r.C, Output: out, Return: ret})
	}
	return ops
}

func operations(h history) ([]porcupine.Operation, error) {
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for n, r := range h.Ops {
		if len(r) != 8 {
			return nil, fmt.Errorf("history %s op %d: want 8 fields, got %d", h.Name, n, len(r))
		}
		in := input{f: int(r[1]), key: r[2], a: r[3], b: r[4]}
		out := output{unknown: r[5] == 1}
		if in.f == opRead {
			out.value = r[3]
		}
		ret := r[7]
		if out.unknown {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{
			ClientId: int(r[0]), Input: in, Call: r[6], Output: out, Return: ret})
	}
	return ops, nil
}

func verdictOf(res porcupine.CheckResult) string {
	return map[porcupine.CheckResult]string{
		porcupine.Ok: "true", porcupine.Illegal: "false", porcupine.Unknown: "unknown"}[res]
}

// ednInput is one op of an EDN history: f (read, write, cas), the key of its
// independent tuple, the value written or the cas's expected (a) and new (b)
// value (0 is nil).
type ednInput struct {
	f    int
	key  string
	a, b int64
}

// independentModel is a register per key (the partition), its state the
// integer last written (0: nil), as Jepsen's independent cas-register.
var independentModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(ednInput).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return int64(0) },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(int64)
		i := in.(ednInput)
		o := out.(output)
		switch i.f {
		case opRead:
			return s == o.value, s
		case opWrite:
			return true, i.a
		default:
			if s == i.a {
				return true, i.b
			}
			return o.unknown, s // a cas whose outcome is unknown may have failed
		}
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	Hash:  func(s interface{}) uint64 { return uint64(s.(int64)) },
}

var ednF = map[edn.Keyword]int{"read": opRead, "write": opWrite, "cas": opCas}

// ednValue returns an EDN register value as an int64 (nil is 0).
func ednValue(v interface{}) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		if x <= 0 {
			return 0, fmt.Errorf("value %d: expected a positive integer or nil", x)
		}
		return x, nil
	}
	return 0, fmt.Errorf("value %v: expected an integer or nil", v)
}

// ednEvent returns the process, type, time and input of one op map (ok false
// for an event of another process than a client's).
func ednEvent(ev map[interface{}]interface{}) (int64, edn.Keyword, int64, ednInput, interface{}, bool, error) {
	var in ednInput
	proc, ok := ev[edn.Keyword("process")].(int64)
	if !ok {
		return 0, "", 0, in, nil, false, nil
	}
	typ, _ := ev[edn.Keyword("type")].(edn.Keyword)
	f, known := ednF[ev[edn.Keyword("f")].(edn.Keyword)]
	t, timed := ev[edn.Keyword("time")].(int64)
	tuple, isTuple := ev[edn.Keyword("value")].([]interface{})
	if !known || !timed || !isTuple || len(tuple) != 2 {
		return 0, "", 0, in, nil, false, fmt.Errorf("op %v: expected :f :read, :write or :cas, a :time and a [key value] :value", ev)
	}
	in.f, in.key = f, fmt.Sprint(tuple[0])
	return proc, typ, t, in, tuple[1], true, nil
}

// ednOperations returns the operations of a Jepsen EDN history file.
func ednOperations(path string) ([]porcupine.Operation, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	type pending struct {
		in   ednInput
		call int64
	}
	open := map[int64]pending{}
	var ops []porcupine.Operation
	dec := edn.NewDecoder(bufio.NewReader(file))
	for {
		var ev map[interface{}]interface{}
		if err := dec.Decode(&ev); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		proc, typ, t, in, value, client, err := ednEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !client {
			continue
		}
		if typ == "invoke" {
			if in.f == opCas {
				pair, ok := value.([]interface{})
				if !ok || len(pair) != 2 {
					return nil, fmt.Errorf("%s: cas %v: expected [key [from to]]", path, value)
				}
				if in.a, err = ednValue(pair[0]); err == nil {
					in.b, err = ednValue(pair[1])
				}
			} else if in.f == opWrite {
				in.a, err = ednValue(value)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			open[proc] = pending{in, t}
			continue
		}
		p, ok := open[proc]
		if !ok {
			return nil, fmt.Errorf("%s: a :%s of process %d with no :invoke", path, typ, proc)
		}
		delete(open, proc)
		switch {
		case typ == "ok":
			out := output{}
			if p.in.f == opRead {
				if out.value, err = ednValue(value); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
			}
			ops = append(ops, porcupine.Operation{ClientId: int(proc), Input: p.in,
				Call: p.call, Output: out, Return: t})
		case typ == "info" && p.in.f != opRead:
			ops = append(ops, porcupine.Operation{ClientId: int(proc), Input: p.in,
				Call: p.call, Output: output{unknown: true}, Return: math.MaxInt64})
		}
	}
	for proc, p := range open { // never completed: may have happened, or not
		if p.in.f != opRead {
			ops = append(ops, porcupine.Operation{ClientId: int(proc), Input: p.in,
				Call: p.call, Output: output{unknown: true}, Return: math.MaxInt64})
		}
	}
	return ops, nil
}

// checkEDN checks each EDN history file and prints one JSON line per file.
func checkEDN(paths []string, timeout time.Duration) error {
	enc := json.NewEncoder(os.Stdout)
	for _, path := range paths {
		ops, err := ednOperations(path)
		if err != nil {
			return err
		}
		t0 := time.Now()
		res := porcupine.CheckOperationsTimeout(independentModel, ops, timeout)
		elapsed := time.Since(t0)
		if err := enc.Encode(map[string]interface{}{"name": path, "ops": len(ops),
			"valid": verdictOf(res), "check_ns": elapsed.Nanoseconds()}); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "-edn" {
		if err := checkEDN(os.Args[2:], 60*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "bad input:", err)
			os.Exit(2)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: porcupine_driver HISTORIES.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		os.Exit(2)
	}
	if req.Repeats < 1 {
		req.Repeats = 1
	}
	timeout := time.Duration(req.TimeoutS * float64(time.Second))
	enc := json.NewEncoder(os.Stdout)
	for _, h := range req.Histories {
		model := kvModel
		var ops []porcupine.Operation
		if h.Model == "kv" {
			model = kvAppendModel
			ops = kvOperations(h)
		} else {
			var err error
			ops, err = operations(h)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bad input:", err)
				os.Exit(2)
			}
		}
		for r := 0; r < req.Repeats; r++ {
			var res, vres porcupine.CheckResult
			var info porcupine.LinearizationInfo
			var elapsed, velapsed time.Duration
			verbose := func() {
				t := time.Now()
				vres, info = porcupine.CheckOperationsVerbose(model, ops, timeout)
				velapsed = time.Since(t)
			}
			if req.VerboseFirst {
				verbose()
			}
			t0 := time.Now()
			res = porcupine.CheckOperationsTimeout(model, ops, timeout)
			elapsed = time.Since(t0)
			if !req.VerboseFirst {
				verbose()
			}
			// the partial linearizations are what the verbose call is for: count them
			// (after the clock stopped) so the work cannot be elided
			partials := 0
			for _, p := range info.PartialLinearizations() {
				partials += len(p)
			}
			if err := enc.Encode(map[string]interface{}{
				"name": h.Name, "repeat": r, "valid": verdictOf(res),
				"check_ns": elapsed.Nanoseconds(), "verbose_valid": verdictOf(vres),
				"verbose_ns": velapsed.Nanoseconds(), "partials": partials,
			}); err != nil {
				os.Exit(1)
			}
			if res == porcupine.Unknown && vres == porcupine.Unknown {
				break // no verdict within the timeout: another repeat would only wait again
			}
		}
	}
}
