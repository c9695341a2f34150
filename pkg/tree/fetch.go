package tree

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// LucidAPI is the Lucid REST API's base URL.
const LucidAPI = "https://api.lucid.co"

// fetchLimit caps a document's size.
const fetchLimit = 64 << 20

// Fetch downloads a Lucid document's contents (GET
// /documents/{id}/contents, API version 1) with an API key or OAuth token
// that may read it, and checks that the result reads as a chart. base ""
// means LucidAPI; client nil means http.DefaultClient.
func Fetch(ctx context.Context, client *http.Client, base, docID, key string) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if base == "" {
		base = LucidAPI
	}
	if strings.TrimSpace(docID) == "" {
		return nil, fmt.Errorf("no document id: copy it from the document's URL (lucid.app/lucidchart/<id>/edit)")
	}
	if key == "" {
		return nil, fmt.Errorf("no Lucid API key: set LUCIDCHART_API_KEY to a key with the DocumentReadonly grant")
	}
	u := strings.TrimRight(base, "/") + "/documents/" + url.PathEscape(docID) + "/contents"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch Lucid document %s: %w", docID, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Lucid-Api-Version", "1")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch Lucid document %s: %w", docID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, fetchLimit+1))
	if err != nil {
		return nil, fmt.Errorf("fetch Lucid document %s: read the response: %w", docID, err)
	}
	if len(body) > fetchLimit {
		return nil, fmt.Errorf("fetch Lucid document %s: the response is over %d MiB", docID, fetchLimit>>20)
	}
	detail := strings.TrimSpace(string(body[:min(len(body), 300)]))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("fetch Lucid document %s: %s: the key in LUCIDCHART_API_KEY may not read it (it needs the DocumentReadonly grant and access to the document): %s", docID, resp.Status, detail)
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("fetch Lucid document %s: %s: no such document, or it is not shared with the key's owner", docID, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("fetch Lucid document %s: %s: %s", docID, resp.Status, detail)
	}
	if _, err := ParseJSON(docID+".tree.json", body); err != nil {
		return nil, fmt.Errorf("fetch Lucid document %s: the answer is not document contents: %w", docID, err)
	}
	return body, nil
}
