package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/urfave/cli/v2"

	"pacer/httpapi"
)

// maxEnqueueFile bounds the JSON read by pacer enqueue (the server's batch
// limit).
const maxEnqueueFile = httpapi.DefaultMaxBatchBodyBytes

// enqueueCommand sends operations to a running pacer.
func enqueueCommand() *cli.Command {
	return clientCommand(&cli.Command{
		Name:  "enqueue",
		Usage: "enqueue operations from a JSON file or stdin",
		Description: `The JSON is one operation, as POST /v1/operations takes it, or a batch
{"operations": [ … ]} of up to 1000, enqueued in one transaction.
Sending the same operation again is harmless: it answers "exists".`,
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "JSON file to read (- or absent: stdin)"},
		},
		Action: runEnqueue,
	})
}

// runEnqueue reads the operations and enqueues them.
func runEnqueue(c *cli.Context) error {
	if err := noOperands(c); err != nil {
		return err
	}
	name, data, err := readEnqueueInput(c)
	if err != nil {
		return err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return exitf(exitUsage, "%s: %v", name, jsonProblem(err))
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	if _, batch := probe["operations"]; batch {
		var req httpapi.BatchRequest
		if err := strictDecode(data, &req); err != nil {
			return exitf(exitUsage, "%s: %v", name, err)
		}
		return enqueueBatch(c, cl, req)
	}
	var req httpapi.EnqueueRequest
	if err := strictDecode(data, &req); err != nil {
		return exitf(exitUsage, "%s: %v", name, err)
	}
	var op httpapi.Operation
	status, err := cl.call(c.Context, http.MethodPost, "/v1/operations", nil, req, &op)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, op)
	}
	return printEnqueued(c.App.Writer, []httpapi.BatchResult{{OperationID: op.OperationID, Status: status, Operation: &op}})
}

// enqueueBatch sends a batch and prints a line per operation. It fails
// (exit code of the first rejection) when any operation was rejected.
func enqueueBatch(c *cli.Context, cl *apiClient, req httpapi.BatchRequest) error {
	var res httpapi.BatchResponse
	if _, err := cl.call(c.Context, http.MethodPost, "/v1/operations/batch", nil, req, &res); err != nil {
		return err
	}
	if c.Bool("json") {
		if err := printJSON(c.App.Writer, res); err != nil {
			return err
		}
	} else if err := printEnqueued(c.App.Writer, res.Results); err != nil {
		return err
	}
	rejected, code := 0, 0
	for _, r := range res.Results {
		if r.Problem != nil {
			rejected++
			if code == 0 {
				code = exitCodeFor(r.Status)
			}
		}
	}
	if rejected > 0 {
		return exitf(code, "%d of %d operations rejected", rejected, len(res.Results))
	}
	return nil
}

// printEnqueued prints one line per enqueued operation.
func printEnqueued(w io.Writer, results []httpapi.BatchResult) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "OPERATION\tRESULT\tSTATE\tNEXT ATTEMPT")
	for _, r := range results {
		switch {
		case r.Problem != nil:
			fmt.Fprintf(tw, "%s\trejected (%d)\t-\t%s\n", r.OperationID, r.Status, oneLine(r.Problem.Detail))
		case r.Operation != nil:
			result := "exists"
			if r.Status == http.StatusCreated {
				result = "created"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.OperationID, result, stateWithReason(*r.Operation), showTime(r.Operation.NextAttemptAt))
		}
	}
	return tw.Flush()
}

// readEnqueueInput reads --file, or stdin, bounded. name says where from,
// for messages.
func readEnqueueInput(c *cli.Context) (name string, data []byte, err error) {
	var r io.Reader
	switch file := c.String("file"); file {
	case "", "-":
		if f, ok := c.App.Reader.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				return "", nil, exitf(exitUsage, "give the operations with --file FILE, or pipe their JSON on stdin")
			}
		}
		name, r = "stdin", c.App.Reader
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", nil, exitf(exitUsage, "read --file: %v", err)
		}
		defer f.Close()
		name, r = file, f
	}
	data, err = io.ReadAll(io.LimitReader(r, maxEnqueueFile+1))
	if err != nil {
		return "", nil, exitf(exitUsage, "read %s: %v", name, err)
	}
	if int64(len(data)) > maxEnqueueFile {
		return "", nil, exitf(exitUsage, "%s is larger than %d bytes: split the batch", name, maxEnqueueFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "", nil, exitf(exitUsage, "%s is empty: give one operation or {\"operations\": [ … ]}", name)
	}
	return name, data, nil
}

// strictDecode decodes exactly one JSON value with only known fields.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// jsonProblem explains a JSON decoding error in a few words.
func jsonProblem(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("invalid JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("want a JSON object (one operation, or {\"operations\": [ … ]}), not %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("field %s: want %s, not %s", typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: it ends before the value does")
	}
	return err
}
