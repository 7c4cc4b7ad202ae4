package lockgen

import "testing"

// TestSuggestParamsOnlyNamesAParamItIsSureOf is issue 26's rule: an
// undeclared placeholder is pointed at a declared param only when that
// param is its one closest match and it is the param's; otherwise the
// error asks to declare it.
func TestSuggestParamsOnlyNamesAParamItIsSureOf(t *testing.T) {
	for _, c := range []struct {
		placeholders, params, used []string
		want                       map[string]string
	}{
		{[]string{"skuID"}, []string{"sku"}, nil, map[string]string{"skuID": "sku"}},
		{[]string{"orderId"}, []string{"orderID"}, nil, map[string]string{"orderId": "orderID"}},
		{[]string{"ordrID"}, []string{"orderID"}, nil, map[string]string{"ordrID": "orderID"}},
		{[]string{"order"}, []string{"orderID"}, nil, map[string]string{"order": "orderID"}},
		{[]string{"id"}, []string{"orderID"}, nil, map[string]string{"id": "orderID"}},
		{[]string{"sku"}, []string{"sku_id"}, nil, map[string]string{"sku": "sku_id"}},
		{[]string{"fromAccount", "to"}, []string{"from", "toAccount"}, nil, map[string]string{"fromAccount": "from", "to": "toAccount"}},
		// Two placeholders near one param: neither is it.
		{[]string{"skuID", "skuCode"}, []string{"sku"}, nil, map[string]string{}},
		// One placeholder near two params: it names neither.
		{[]string{"id"}, []string{"orderID", "shopID"}, nil, map[string]string{}},
		// The pattern uses the param already: the placeholder is a new one.
		{[]string{"skuID"}, []string{"sku"}, []string{"sku", "skuID"}, map[string]string{}},
		// Not near: letters inside a word, an acronym's tail, short names.
		{[]string{"paid"}, []string{"id"}, nil, map[string]string{}},
		{[]string{"ds"}, []string{"userIDs"}, nil, map[string]string{}},
		{[]string{"url"}, []string{"URLPath"}, nil, map[string]string{}},
		{[]string{"x"}, []string{"y"}, nil, map[string]string{}},
		{[]string{"month"}, nil, nil, map[string]string{}},
	} {
		used := map[string]bool{}
		for _, u := range c.used {
			used[u] = true
		}
		got := suggestParams(c.placeholders, c.params, used)
		if len(got) != len(c.want) {
			t.Errorf("suggestParams(%v, %v, used %v) = %v, want %v", c.placeholders, c.params, c.used, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("suggestParams(%v, %v, used %v) = %v, want %v", c.placeholders, c.params, c.used, got, c.want)
				break
			}
		}
	}
}
