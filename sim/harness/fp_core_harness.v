// Plain-Verilog bulk harness for the combinational fp cores (Fp32AddCore, Bf16MulCore): no
// clock, no cocotb, no Python on the per-vector path. Compile with
//   -DDUT=<core module> -DWA=<a width> -DWB=<b width> -DNVEC=<vector count>
// and run with +vectors=<file>. Each line of the vector file is one hex word {a, b, expected y}
// (y in the low 32 bits). Every vector is applied for one time unit and the core's y compared
// with the expected word. Output: up to 10 "MISMATCH" lines, then
//   RESULT n=<vectors checked> errors=<mismatches>
`timescale 1ns/1ps
module fp_core_harness;
  localparam WA = `WA;
  localparam WB = `WB;
  localparam W = WA + WB + 32;
  localparam N = `NVEC;

  reg [W-1:0] vec [0:N-1];
  reg [WA+WB-1:0] ab = 0;
  wire [31:0] y;
  reg [1023:0] path;
  integer k, errors;

  `DUT dut (.a(ab[WA+WB-1:WB]), .b(ab[WB-1:0]), .y(y));

  initial begin
    if (!$value$plusargs("vectors=%s", path)) begin
      $display("ERROR: +vectors=<file> is required");
      $finish;
    end
    $readmemh(path, vec);
    errors = 0;
    for (k = 0; k < N; k = k + 1) begin
      ab = vec[k][W-1:32];
      #1;
      if (y !== vec[k][31:0]) begin
        errors = errors + 1;
        if (errors <= 10)
          $display("MISMATCH %0d: a=%h b=%h got=%h want=%h", k, ab[WA+WB-1:WB], ab[WB-1:0], y, vec[k][31:0]);
      end
    end
    $display("RESULT n=%0d errors=%0d", k, errors);
    $finish;
  end
endmodule
