// A loop that never ends (its condition is always true), on 8 partitions: for timeouts.
module @loop attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<f32> {mhlo.sharding = "{replicated}"})
      -> (tensor<f32> {mhlo.sharding = "{replicated}"}) {
    %r = stablehlo.while(%i = %x) : tensor<f32>
      cond {
        %t = stablehlo.compare EQ, %i, %i : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %t : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1.0> : tensor<f32>
        %n = stablehlo.add %i, %one : tensor<f32>
        stablehlo.return %n : tensor<f32>
      }
    return %r : tensor<f32>
  }
}
