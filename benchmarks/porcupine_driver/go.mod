module replicalab/porcupine_driver

go 1.22

require github.com/anishathalye/porcupine v1.3.1

require olympos.io/encoding/edn v0.0.0-20201019073823-d3554ca0b0a3
