package fakehs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"maunium.net/go/mautrix"
)

// mErr is a Matrix error with the status and errcode Synapse gives it, as
// mautrix's RespError (extra body fields through WithExtraField), which
// writeError encodes.
func mErr(status int, code, format string, args ...any) mautrix.RespError {
	return mautrix.RespError{StatusCode: status, ErrCode: code, Err: fmt.Sprintf(format, args...)}
}

func errForbidden(format string, args ...any) mautrix.RespError {
	return mErr(http.StatusForbidden, "M_FORBIDDEN", format, args...)
}

func errNotFound(format string, args ...any) mautrix.RespError {
	return mErr(http.StatusNotFound, "M_NOT_FOUND", format, args...)
}

func errInvalidParam(format string, args ...any) mautrix.RespError {
	return mErr(http.StatusBadRequest, "M_INVALID_PARAM", format, args...)
}

func errBadJSON(format string, args ...any) mautrix.RespError {
	return mErr(http.StatusBadRequest, "M_BAD_JSON", format, args...)
}

// writeJSON writes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"errcode":"M_UNKNOWN","error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes err as a Matrix error body; non-Matrix errors become 500 M_UNKNOWN.
func writeError(w http.ResponseWriter, err error) {
	var uia *uiaChallenge
	if errors.As(err, &uia) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"flows":   []map[string]any{{"stages": []string{"m.login.dummy"}}},
			"params":  map[string]any{},
			"session": randomID(12),
		})
		return
	}
	var me mautrix.RespError
	if !errors.As(err, &me) {
		me = mErr(http.StatusInternalServerError, "M_UNKNOWN", "%v", err)
	}
	writeJSON(w, me.StatusCode, &me)
}

// maxBody bounds request bodies; Synapse's default max_upload for JSON is far
// larger, but nothing a test sends comes near this.
const maxBody = 8 << 20

// readJSON decodes the request body into v: invalid JSON is M_NOT_JSON and
// JSON of the wrong shape is M_BAD_JSON, as Synapse answers.
func readJSON(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return mErr(http.StatusBadRequest, "M_UNKNOWN", "reading body: %v", err)
	}
	if len(data) > maxBody {
		return mErr(http.StatusRequestEntityTooLarge, "M_TOO_LARGE", "body too large")
	}
	if len(data) == 0 {
		// Synapse treats an empty body as {} on endpoints whose fields are all optional.
		data = []byte("{}")
	}
	if !json.Valid(data) {
		return mErr(http.StatusBadRequest, "M_NOT_JSON", "Content not JSON.")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errBadJSON("wrong JSON shape: %v", err)
	}
	return nil
}

// readObject decodes a body that must be a JSON object, keeping raw bytes.
func readObject(r *http.Request) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "reading body: %v", err)
	}
	if len(data) > maxBody {
		return nil, mErr(http.StatusRequestEntityTooLarge, "M_TOO_LARGE", "body too large")
	}
	if !json.Valid(data) {
		return nil, mErr(http.StatusBadRequest, "M_NOT_JSON", "Content not JSON.")
	}
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, errBadJSON("content must be a JSON object")
	}
	return json.RawMessage(data), nil
}

// validateCanonical rejects content Synapse refuses in current room
// versions: floats and integers outside [-(2^53)+1, 2^53-1] are 400 M_BAD_JSON.
func validateCanonical(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return errBadJSON("invalid content: %v", err)
	}
	return checkCanonical(v)
}

func checkCanonical(v any) error {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return errBadJSON("Bad JSON value: float")
		}
		if n > 1<<53-1 || n < -(1<<53-1) {
			return errBadJSON("JSON integer out of range")
		}
	case map[string]any:
		for _, e := range x {
			if err := checkCanonical(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkCanonical(e); err != nil {
				return err
			}
		}
	}
	return nil
}
