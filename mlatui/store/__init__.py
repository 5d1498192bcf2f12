"""What mlatui remembers per device between runs: calibrated crossovers and the harness's measured bias."""
