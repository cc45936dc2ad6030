RETURNING {claim_columns}
