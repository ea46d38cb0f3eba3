-- An invoice's rounding carry (billing.Invoice.CarriedMicros): what the
-- org's earlier stays on the listing that month rounded away, in micros, as
-- an exact fraction ("num/den"); empty when none.
ALTER TABLE billing_invoices ADD COLUMN carried TEXT NOT NULL DEFAULT '';
